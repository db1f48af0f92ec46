package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
)

// ls and gc look at both backends: the local backend's interactive
// clusters, recorded on this machine, and raystep's objects on
// Kubernetes. Kubernetes is left out only when nothing points at it: the
// backend is not kuberay, no kubeconfig exists and no --namespace is
// given, so that `raystep ls` on a laptop lists the local clusters instead
// of failing. Local clusters have no namespace: --namespace leaves them out.

// skipKube reports whether ls or gc, failing to reach Kubernetes with
// err, looks at the local clusters only.
func (a *app) skipKube(err error) bool {
	return errors.Is(err, kuberay.ErrNoKubeconfig) && a.cfg.Backend != "kuberay"
}

// recordedClusters returns the local interactive clusters and their
// Clusters; none when there is no state dir, where no up can have
// recorded one.
func (a *app) recordedClusters() (*local.Clusters, []local.Interactive, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return nil, nil, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	c, err := a.localClusters()
	if err != nil {
		return nil, nil, err
	}
	all, err := c.List()
	return c, all, err
}

// localDeployment is a local cluster's status in the DEPLOYMENT column:
// "ready" like a ready RayCluster, else "expired" or "gone".
func localDeployment(s local.Status) string {
	if s == local.StatusRunning {
		return "ready"
	}
	return string(s)
}

// summarizeLocal describes a local interactive or run-scoped cluster as
// ls describes a KubeRay one, with no namespace: the same record, in the
// table and in -o json, KIND run for a Dagster run's head.
func summarizeLocal(in local.Interactive) kuberay.Summary {
	expires := in.Expires.UTC()
	kind := kuberay.KindInteractive
	if local.IsRunScoped(in) {
		kind = kuberay.KindRun
	}
	return kuberay.Summary{
		Name: in.Name, ClusterKind: kind, Owner: in.Owner, Kind: kind,
		Deployment: localDeployment(in.Status), Created: in.Created.UTC(), Dashboard: in.DashboardURL,
		Expires: &expires, Notebook: hasLocalNotebook(in),
	}
}

// localSteps returns the steps running on private heads of this machine.
func (a *app) localSteps() ([]local.StepRecord, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return nil, nil
	}
	return local.ListSteps(local.StepsDir(dir))
}

// summarizeLocalStep describes a step on a private head of this machine as
// ls describes a step's RayJob, with no namespace.
func summarizeLocalStep(st local.StepRecord) kuberay.Summary {
	return kuberay.Summary{
		Name: st.ID, ClusterKind: kuberay.ClusterKindStep, Owner: st.Owner, Kind: st.Kind,
		Deployment: st.State, JobStatus: st.JobStatus, Created: st.Created.UTC(), Dashboard: st.DashboardURL,
		RunID: st.RunID,
	}
}

// gcVerbs are the words of gc's lines for each local.Action: done, and
// with --dry-run.
var gcVerbs = map[local.Action][2]string{
	local.ActionKept:    {"kept", "would keep"},
	local.ActionStopped: {"stopped", "would stop"},
	local.ActionRemoved: {"removed", "would remove"},
}

// gcLocal stops the expired local clusters (local.Clusters.GC) and prints
// one line for each cluster, as gc does for RayClusters.
func (a *app) gcLocal(cmd *cobra.Command, dryRun bool, now time.Time) error {
	c, _, err := a.recordedClusters()
	if err != nil || c == nil {
		return err
	}
	results, err := c.GC(cmd.Context(), dryRun)
	for _, r := range results {
		if r.Err != nil {
			continue // in the error
		}
		in, why := r.Cluster, ""
		switch r.Action {
		case local.ActionKept:
			why = "expires in " + in.Expires.Sub(now).Round(time.Second).String()
		case local.ActionStopped:
			why = "expired " + now.Sub(in.Expires).Round(time.Second).String() + " ago"
		default:
			why = string(in.Status) + ", its head no longer runs"
		}
		verb := gcVerbs[r.Action][0]
		if dryRun {
			verb = gcVerbs[r.Action][1]
		}
		fmt.Fprintf(a.stdout, "%s local cluster %s: %s\n", verb, in.Name, why)
	}
	return err
}
