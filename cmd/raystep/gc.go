package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/runner/kuberay"
)

// gcOptions are gc's flags.
type gcOptions struct {
	namespace     string
	allNamespaces bool
	olderThan     time.Duration
	dryRun        bool
	now           func() time.Time
}

func (a *app) gcCommand() *cobra.Command {
	o := gcOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "gc [--older-than DUR] [--dry-run]",
		Short: "Delete raystep RayJobs whose step is gone",
		Long: `gc deletes the RayJobs raystep created whose step is gone: finished (once
their ttlAfterFinished debugging window has passed), running past
timeouts.run, or still provisioning past timeouts.provision, for example
after the step was SIGKILLed. A RayJob that provisions or runs on time is
never deleted. Deleting a RayJob removes its RayCluster and pods.`,
		Example: "  raystep gc --dry-run -A\n  raystep gc -n ml-ads --older-than 24h",
		Args:    cobra.NoArgs,
		PreRun:  a.begin,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.gc(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "collect in every namespace")
	f.DurationVar(&o.olderThan, "older-than", 0, "only RayJobs created longer ago than this, e.g. 24h")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	return cmd
}

func (a *app) gc(cmd *cobra.Command, o gcOptions) error {
	if o.olderThan < 0 {
		return &usageError{fmt.Errorf("gc: --older-than %s: must not be negative", o.olderThan)}
	}
	clients, jobs, err := a.rayJobs(cmd, "gc", o.namespace, o.allNamespaces)
	if err != nil {
		return err
	}
	now := o.now()
	verdicts := make([]kuberay.Verdict, len(jobs))
	for i := range jobs {
		verdicts[i] = kuberay.Judge(&jobs[i], now, o.olderThan)
		if !verdicts[i].Collect {
			a.log.Debug(fmt.Sprintf("keeping RayJob %s/%s: %s", jobs[i].Namespace, jobs[i].Name, verdicts[i].Reason))
		}
	}
	verb := "deleted"
	if o.dryRun {
		verb = "would delete"
	}
	return kuberay.Collect(cmd.Context(), clients.Ray, verdicts, o.dryRun, func(v kuberay.Verdict, err error) {
		if err == nil {
			fmt.Fprintf(a.stdout, "%s RayJob %s/%s: %s\n", verb, v.Job.Namespace, v.Job.Name, v.Reason)
		}
	})
}
