package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/raystep/raystep/fleet"
)

// Fleet is this machine's private heads as ls and gc see them: the steps
// running on heads of their own, then the interactive and run-scoped
// clusters recorded in the state dir. Local clusters have no namespace:
// a scope that names one leaves them out (fleet.ErrNotHere).
type Fleet struct {
	// Clusters are the recorded clusters; nil when there is no state dir,
	// where no up can have recorded one.
	Clusters *Clusters
	// StepsDir is where running steps are recorded (StepsDir); empty when
	// there is no state dir.
	StepsDir string
}

var _ fleet.Fleet = (*Fleet)(nil)

// List returns the steps on private heads, then the clusters.
func (f *Fleet) List(_ context.Context, scope fleet.Scope) ([]fleet.Record, error) {
	if scope.Namespace != "" {
		return nil, fmt.Errorf("local clusters in namespace %s: %w", scope.Namespace, fleet.ErrNotHere)
	}
	var rows []fleet.Record
	if f.StepsDir != "" {
		steps, err := ListSteps(f.StepsDir)
		if err != nil {
			return nil, err
		}
		for _, st := range steps {
			rows = append(rows, stepRecord(st))
		}
	}
	if f.Clusters == nil {
		return rows, nil
	}
	all, err := f.Clusters.List()
	if err != nil {
		return nil, err
	}
	for _, in := range all {
		rows = append(rows, Record(in))
	}
	return rows, nil
}

// stepRecord describes a step on a private head of this machine as ls
// describes a step's RayJob, with no namespace.
func stepRecord(st StepRecord) fleet.Record {
	return fleet.Record{
		Backend: fleet.BackendLocal, Name: st.ID, ClusterKind: fleet.KindStep, Owner: st.Owner, Kind: st.Kind,
		Deployment: st.State, JobStatus: st.JobStatus, Created: st.Created.UTC(), Dashboard: st.DashboardURL,
		RunID: st.RunID, Asset: st.Asset,
	}
}

// Record describes a local interactive or run-scoped cluster as ls
// describes a KubeRay one, with no namespace: KIND run for a Dagster
// run's head, DEPLOYMENT "ready" like a ready RayCluster, else "expired"
// or "gone".
func Record(in Interactive) fleet.Record {
	expires := in.Expires.UTC()
	kind := fleet.KindInteractive
	if IsRunScoped(in) {
		kind = fleet.KindRun
	}
	deployment := string(in.Status)
	if in.Status == StatusRunning {
		deployment = "ready"
	}
	_, err := os.Stat(in.NotebookFile())
	r := fleet.Record{
		Backend: fleet.BackendLocal, Name: in.Name, ClusterKind: kind, Owner: in.Owner, Kind: kind,
		Deployment: deployment, Created: in.Created.UTC(), Dashboard: in.DashboardURL,
		Expires: &expires, Notebook: err == nil,
	}
	if in.Status == StatusRunning {
		r.IdleSince = in.idleSince()
	}
	return r
}

// idleFile is where the head's supervisor says since when it found the
// head idle, while it does (see keeper.py), in the head's temp dir.
func (in Interactive) idleFile() string { return filepath.Join(in.TempDir, "raystep-idle.json") }

// idleSince reads since when the supervisor found the head idle; nil
// when it is in use, or not judged.
func (in Interactive) idleSince() *time.Time {
	var rec struct {
		IdleSince time.Time `json:"idleSince"`
	}
	b, err := os.ReadFile(in.idleFile())
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.IdleSince.IsZero() {
		return nil
	}
	t := rec.IdleSince.UTC()
	return &t
}

// NotebookFile is where up --notebook keeps the notebook of in (its port
// and token, readable by its user only), in the head's temp dir, which
// goes with the head.
func (in Interactive) NotebookFile() string {
	return filepath.Join(in.TempDir, "raystep-notebook.json")
}

// gcVerbs are the words of gc's lines for each Action: done, and with
// --dry-run.
var gcVerbs = map[Action][2]string{
	ActionKept:    {"kept", "would keep"},
	ActionStopped: {"stopped", "would stop"},
	ActionRemoved: {"removed", "would remove"},
}

// GC stops the expired clusters and clears away the gone ones
// (Clusters.GC), and tells one line for each cluster, as gc does for
// RayClusters.
func (f *Fleet) GC(ctx context.Context, scope fleet.Scope, o fleet.GCOptions, line func(string)) error {
	if scope.Namespace != "" {
		return fmt.Errorf("local clusters in namespace %s: %w", scope.Namespace, fleet.ErrNotHere)
	}
	if f.Clusters == nil {
		return nil
	}
	results, err := f.Clusters.GC(ctx, o.DryRun)
	for _, r := range results {
		if r.Err != nil {
			continue // in the error
		}
		in, why := r.Cluster, ""
		switch r.Action {
		case ActionKept:
			why = "expires in " + in.Expires.Sub(o.Now).Round(time.Second).String()
		case ActionStopped:
			why = "expired " + o.Now.Sub(in.Expires).Round(time.Second).String() + " ago"
		default:
			why = string(in.Status) + ", its head no longer runs"
		}
		verb := gcVerbs[r.Action][0]
		if o.DryRun {
			verb = gcVerbs[r.Action][1]
		}
		line(fmt.Sprintf("%s local cluster %s: %s", verb, in.Name, why))
	}
	return err
}

// DownRun stops the run-scoped private heads of the Dagster run runID.
// They have no namespace, and the run id alone names them: a namespace in
// the scope (the Dagster resource's, for its KubeRay steps) leaves them
// in.
func (f *Fleet) DownRun(ctx context.Context, _ fleet.Scope, runID string, gone func(string)) error {
	if f.Clusters == nil {
		return fleet.ErrNotHere
	}
	names, err := f.Clusters.DownRun(ctx, runID)
	for _, n := range names {
		gone("private head " + n + " deleted")
	}
	if err != nil {
		return fmt.Errorf("down --dagster-run-id %s: %w", runID, err)
	}
	return nil
}
