package main

import (
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
)

// downRunOptions are down's flags for run-scoped clusters.
type downRunOptions struct{ runID string }

func (r *downRunOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&r.runID, "dagster-run-id", "", "delete the run-scoped clusters (spec.cluster.reuse: run) of this Dagster run instead of named ones")
	cmd.Long += `

With --dagster-run-id ID (and no names) down deletes the run-scoped
clusters of that Dagster run (spec.cluster.reuse: run): the private heads
of the local backend recorded on this machine, and, when the backend is
kuberay ($RAYSTEP_BACKEND or --backend), the RayClusters labelled with the
run id in the namespace. It waits until they are gone; a run without any
is fine (exit 0, with a note). dagster-raystep's run-status sensor runs it
when a run ends.`
}

// downArgs wants names, or --dagster-run-id and none.
func downArgs(cmd *cobra.Command, r downRunOptions, names []string) error {
	switch {
	case r.runID != "" && len(names) > 0:
		return fmt.Errorf("down: give cluster names or --dagster-run-id, not both")
	case r.runID == "" && len(names) == 0:
		return fmt.Errorf("down: give the names of the clusters to delete, or --dagster-run-id ID")
	}
	return nil
}

// downRun deletes the run-scoped clusters of Dagster run r.runID on the
// local backend and, when it is the backend, on KubeRay.
func (a *app) downRun(cmd *cobra.Command, r downRunOptions, namespace string) error {
	ctx := cmd.Context()
	var deleted []string
	var errs []error
	if dir, err := a.localStateDir(); err == nil {
		names, err := (&local.Clusters{Dir: dir}).DownRun(ctx, r.runID)
		for _, n := range names {
			deleted = append(deleted, "private head "+n)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("down --dagster-run-id %s: %w", r.runID, err))
		}
	}
	backend := a.cfg.Backend
	if f := cmd.Flags().Lookup("backend"); f != nil && f.Value.String() != "" {
		backend = f.Value.String()
	}
	if backend == "kuberay" {
		names, err := a.downRunKubeRay(cmd, r, namespace)
		deleted = append(deleted, names...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range deleted {
		fmt.Fprintf(a.stdout, "%s deleted\n", d)
	}
	if len(deleted) == 0 && len(errs) == 0 {
		fmt.Fprintf(a.stdout, "Dagster run %s has no run-scoped clusters: nothing to delete\n", r.runID)
	}
	return errors.Join(errs...)
}

// downRunKubeRay deletes the run's RayClusters at once and waits for each.
func (a *app) downRunKubeRay(cmd *cobra.Command, r downRunOptions, namespace string) ([]string, error) {
	profile, err := a.profile(cmd)
	if err != nil {
		return nil, err
	}
	clients, _, err := a.kube("down")
	if err != nil {
		return nil, err
	}
	ns := kuberay.ResolveNamespace(kuberay.Namespaces{Flag: namespace, Env: a.cfg.Namespace,
		Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
	i := &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Notify: a.notices()}
	ctx := cmd.Context()
	found, err := kuberay.ListRunClusters(ctx, i, ns, r.runID)
	if err != nil {
		return nil, fmt.Errorf("down --dagster-run-id %s: %w", r.runID, err)
	}
	errs := make([]error, len(found))
	names := make([]string, len(found))
	var wg sync.WaitGroup
	for k := range found {
		rc := &found[k]
		wg.Go(func() {
			if errs[k] = i.Delete(ctx, rc.Namespace, rc.Name, rc.UID); errs[k] == nil {
				names[k] = "RayCluster " + rc.Namespace + "/" + rc.Name
			}
		})
	}
	wg.Wait()
	var done []string
	for _, n := range names {
		if n != "" {
			done = append(done, n)
		}
	}
	return done, errors.Join(errs...)
}
