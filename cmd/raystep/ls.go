package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/history"
)

// lsOptions are ls's flags.
type lsOptions struct {
	namespace     string
	allNamespaces bool
	output        string
	finished      bool
	since         time.Duration
	now           func() time.Time
}

func (a *app) lsCommand() *cobra.Command {
	o := lsOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "ls [-A] [-o wide|json] | ls --finished [--since 24h] [-o json]",
		Short: "List raystep's clusters: steps and interactive ones, owner, GPUs, status, age, expiry, dashboard",
		Long: `ls lists the clusters raystep created (label app.kubernetes.io/managed-by=raystep)
in the namespace given by --namespace, $RAYSTEP_NAMESPACE, the profile or the
kubeconfig, or in every namespace with -A: steps' RayJobs first (KIND step,
TYPE the spec's kind), then interactive RayClusters made by up (KIND
interactive, with their expiry), then the local backend's interactive
clusters on this machine (KIND interactive, no namespace, DEPLOYMENT
ready, expired or gone; left out with --namespace). Without a kubeconfig, and unless RAYSTEP_BACKEND
is kuberay, ls lists the local clusters only. -o json carries the same,
KIND as clusterKind.

ls --finished lists instead the steps that ended, the latest first, from
the history of this machine and of the store the profile's
spec.history.url names (see raystep logs): name, spec, owner,
backend, when each ended, how long it took, its exit code and how it
ended (succeeded, failed, cancelled by which signal, deadline,
infrastructure); --since keeps those that ended within that long. -o
json writes the whole records.`,
		Example: "  raystep ls -A\n  raystep ls -n ml-ads -o json\n  raystep ls --finished --since 24h",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.ls(cmd, o) },
	}
	f := cmd.Flags()
	namespaceFlag(f, &o.namespace, "n", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list every namespace")
	f.StringVarP(&o.output, "output", "o", "", "output format: wide or json (default a table)")
	f.BoolVar(&o.finished, "finished", false, "list the steps that ended (this machine's and the profile's history), with how they ended")
	f.DurationVar(&o.since, "since", 0, "with --finished, only steps that ended within this long (e.g. 24h)")
	return cmd
}

func (a *app) ls(cmd *cobra.Command, o lsOptions) error {
	if o.output != "" && o.output != "wide" && o.output != "json" {
		return &usageError{fmt.Errorf("ls: -o %q: want wide or json", o.output)}
	}
	if o.finished {
		return a.lsFinished(cmd, o)
	}
	if o.since != 0 {
		return &usageError{fmt.Errorf("ls: --since needs --finished")}
	}
	scope, err := fleetScope("ls", o.namespace, o.allNamespaces)
	if err != nil {
		return err
	}
	fleets, err := a.fleets(cmd, "ls")
	if err != nil {
		return err
	}
	rows, err := fleet.List(cmd.Context(), fleets, scope)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return fleet.WriteJSON(a.stdout, rows)
	}
	return fleet.WriteTable(a.stdout, rows, fleet.TableOptions{AllNamespaces: o.allNamespaces, Wide: o.output == "wide", Now: o.now()})
}

// fleetScope is where ls, gc and ui look: --namespace, or -A.
func fleetScope(name, namespace string, all bool) (fleet.Scope, error) {
	if all && namespace != "" {
		return fleet.Scope{}, &usageError{fmt.Errorf("%s: -A and --namespace exclude each other", name)}
	}
	return fleet.Scope{Namespace: namespace, All: all}, nil
}

// lsFinished lists the steps that ended, from the history.
func (a *app) lsFinished(cmd *cobra.Command, o lsOptions) error {
	if o.output == "wide" || o.namespace != "" || o.allNamespaces {
		return &usageError{fmt.Errorf("ls --finished: -o wide, --namespace and -A do not apply: it lists the history")}
	}
	if o.since < 0 {
		return &usageError{fmt.Errorf("ls --finished: --since %s: want a positive duration", o.since)}
	}
	idx, done, err := a.historyIndex(cmd)
	if err != nil {
		return err
	}
	defer done()
	now := o.now()
	var since time.Time
	if o.since > 0 {
		since = now.Add(-o.since)
	}
	recs, errs := idx.List(cmd.Context(), since)
	for _, err := range errs {
		fmt.Fprintf(a.stderr, "raystep: warning: %v\n", err)
	}
	if o.output == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if recs == nil {
			recs = []history.Record{}
		}
		return enc.Encode(recs)
	}
	finishedTable(a.stdout, recs, now)
	return nil
}
