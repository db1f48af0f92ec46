package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/raystep/raystep/runner/kuberay"
)

// gcOptions are gc's flags.
type gcOptions struct {
	namespace      string
	allNamespaces  bool
	olderThan      time.Duration
	heartbeatGrace time.Duration
	dryRun         bool
	now            func() time.Time
}

func (a *app) gcCommand() *cobra.Command {
	o := gcOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "gc [--older-than DUR] [--heartbeat-grace DUR] [--dry-run]",
		Short: "Delete raystep RayJobs whose step is gone, and expired interactive clusters",
		Long: `gc deletes the RayJobs raystep created whose step is gone, and the
interactive clusters (raystep up) whose expiry has passed, and prints one
line per RayJob or RayCluster: what it did (or, with --dry-run, would do)
and why. An interactive cluster is deleted once its expiry (the
raystep.dev/expires-at annotation) has passed, never before.

A running step renews a heartbeat Lease named after its RayJob every 15s.
gc deletes a RayJob whose heartbeat stopped longer than --heartbeat-grace
ago (never less than the Lease's leaseDurationSeconds, three renewal
intervals) because the step was SIGKILLed or its machine died, and never
one whose heartbeat is fresh. A step that ended and kept its cluster (teardown never,
or on_success after a failure) released its Lease; such RayJobs, and those
of older raystep versions without a Lease, are deleted once finished and
past their ttlAfterFinished debugging window, running past timeouts.run,
or still provisioning past timeouts.provision. Deleting a RayJob removes
its RayCluster, pods and Lease.

gc also clears away the local backend's interactive clusters on this
machine that are expired (their supervisor stops them by itself; gc stops
one that is still stopping) or whose head died, and keeps live ones.
Without a kubeconfig, and unless RAYSTEP_BACKEND is kuberay, gc looks at
the local clusters only; with --namespace, at that namespace only.`,
		Example: "  raystep gc --dry-run -A\n  raystep gc -n ml-ads --older-than 24h",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.gc(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "collect in every namespace")
	f.DurationVar(&o.olderThan, "older-than", 0, "only RayJobs created longer ago than this, e.g. 24h")
	f.DurationVar(&o.heartbeatGrace, "heartbeat-grace", kuberay.DefaultHeartbeatGrace, "delete a RayJob whose step's heartbeat stopped longer ago than this")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be deleted and kept, delete nothing")
	return cmd
}

// serverNow is the clock gc judges RayJobs and their heartbeats by: the
// API server's (kuberay.ServerNow), in ns or the namespace of a Lease,
// when there is a Lease to judge; else, or when the server's clock cannot
// be read, this machine's (now), said on stderr.
func (a *app) serverNow(cmd *cobra.Command, clients *kuberay.Clients, ns string, leases map[string]*coordinationv1.Lease, now time.Time) time.Time {
	if len(leases) == 0 {
		return now
	}
	if ns == "" {
		for _, l := range leases {
			ns = l.Namespace
			break
		}
	}
	t, err := kuberay.ServerNow(cmd.Context(), clients.Kube, ns)
	if err != nil {
		fmt.Fprintf(a.stderr, "gc: heartbeats judged by this machine's clock: %v\n", err)
		return now
	}
	return t
}

func (a *app) gc(cmd *cobra.Command, o gcOptions) error {
	if o.olderThan < 0 {
		return &usageError{fmt.Errorf("gc: --older-than %s: must not be negative", o.olderThan)}
	}
	if o.heartbeatGrace <= 0 {
		return &usageError{fmt.Errorf("gc: --heartbeat-grace %s: must be positive", o.heartbeatGrace)}
	}
	clients, ns, jobs, err := a.rayJobs(cmd, "gc", o.namespace, o.allNamespaces)
	if a.skipKube(err) && o.namespace == "" {
		return a.gcLocal(cmd, o.dryRun, o.now())
	}
	if err != nil {
		return err
	}
	leases, err := kuberay.ListLeases(cmd.Context(), clients.Kube, ns)
	if err != nil {
		return err
	}
	clusters, err := kuberay.ListClusters(cmd.Context(), clients.Ray, ns)
	if err != nil {
		return err
	}
	now, judge := o.now(), kuberay.JudgeOptions{OlderThan: o.olderThan, HeartbeatGrace: o.heartbeatGrace}
	kubeNow := a.serverNow(cmd, clients, ns, leases, now)
	verdicts := append(kuberay.JudgeAll(jobs, leases, kubeNow, judge), kuberay.JudgeClusters(clusters, kubeNow, judge)...)
	err = kuberay.Collect(cmd.Context(), clients.Ray, verdicts, o.dryRun, func(r kuberay.Result) {
		if r.Action == kuberay.Failed {
			return // in the error gc returns
		}
		line := fmt.Sprintf("%s %s: %s", r.Action, r.Object(), r.Reason)
		if r.Note != "" {
			line += "; not deleted: " + r.Note
		}
		fmt.Fprintln(a.stdout, line)
	})
	if o.namespace != "" {
		return err // local clusters have no namespace
	}
	return errors.Join(err, a.gcLocal(cmd, o.dryRun, now))
}
