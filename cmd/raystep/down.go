package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
)

// downOptions are down's flags.
type downOptions struct{ namespace, runID string }

func (a *app) downCommand() *cobra.Command {
	var o downOptions
	cmd := &cobra.Command{
		Use:   "down NAME... | down --dagster-run-id ID",
		Short: "Delete interactive clusters and wait until they are gone",
		Long: `down deletes each interactive cluster named (made by raystep up) and waits
until it is gone. It looks every name up first and deletes nothing when
one of them is not a raystep interactive cluster (exit 2).

On the local backend (the default) it stops each cluster's private head
and returns once every process of it has exited and its temp dir is
removed. On the KubeRay backend (--backend kuberay) it waits until the
RayCluster and its pods are gone; a step's cluster or anyone else's
RayCluster is never touched.

With --dagster-run-id ID (and no names) down deletes the run-scoped
clusters of that Dagster run (spec.cluster.reuse: run): the private heads
of the local backend recorded on this machine, and, when the backend is
kuberay ($RAYSTEP_BACKEND or --backend), the RayClusters labelled with the
run id in the namespace. It waits until they are gone; a run without any
is fine (exit 0, with a note). dagster-raystep's run-status sensor runs it
when a run ends.`,
		Example: "  raystep down alice-dev\n  raystep down -n ml-ads alice-dev bob-eval",
		Args:    func(_ *cobra.Command, names []string) error { return downArgs(o, names) },
		RunE:    func(cmd *cobra.Command, names []string) error { return a.down(cmd, o, names) },
	}
	namespaceFlag(cmd.Flags(), &o.namespace, "n", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's; KubeRay only)")
	addBackendFlag(cmd)
	cmd.Flags().StringVar(&o.runID, "dagster-run-id", "", "delete the run-scoped clusters (spec.cluster.reuse: run) of this Dagster run instead of named ones")
	return cmd
}

// downArgs wants names, or --dagster-run-id and none.
func downArgs(o downOptions, names []string) error {
	switch {
	case o.runID != "" && len(names) > 0:
		return fmt.Errorf("down: give cluster names or --dagster-run-id, not both")
	case o.runID == "" && len(names) == 0:
		return fmt.Errorf("down: give the names of the clusters to delete, or --dagster-run-id ID")
	}
	return nil
}

// down deletes the named interactive clusters of the backend asked for,
// or the run-scoped clusters of a Dagster run on every backend that has
// them.
func (a *app) down(cmd *cobra.Command, o downOptions, names []string) error {
	say := func(msg string) { fmt.Fprintln(a.stdout, msg) }
	fleets, err := a.fleets(cmd, "down")
	if o.runID == "" {
		s, serr := a.site(cmd, "down")
		if serr != nil {
			return serr
		}
		var ledger *clusterLedger
		if err == nil { // the history of the clusters down deletes, from the site's own fleet
			var mine []fleet.Fleet
			for _, f := range fleets {
				if _, kube := f.(*kuberay.Fleet); kube == (a.backend(cmd) == "kuberay") {
					mine = append(mine, f)
				}
			}
			ledger = a.noteClusters(cmd, mine, fleet.Scope{Namespace: o.namespace})
		}
		err = s.Down(cmd.Context(), names, say)
		ledger.record("deleted by raystep down")
		return err
	}
	if err != nil {
		return err
	}
	ledger := a.noteClusters(cmd, fleets, fleet.Scope{Namespace: o.namespace})
	n, err := fleet.DownRun(cmd.Context(), fleets, fleet.Scope{Namespace: o.namespace}, o.runID, say)
	ledger.record("deleted when Dagster run " + o.runID + " ended")
	if n == 0 && err == nil {
		fmt.Fprintf(a.stdout, "Dagster run %s has no run-scoped clusters: nothing to delete\n", o.runID)
	}
	return err
}
