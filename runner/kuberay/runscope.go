package kuberay

import (
	"context"
	"errors"
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// Run-scoped clusters (spec.cluster.reuse: run): the steps of one Dagster
// run whose resolved cluster sections are identical share one RayCluster,
// named after the run id and the section's hash (runner.RunClusterName). The
// first step to arrive creates it; the API server's name uniqueness
// decides between steps that arrive together, and the others attach.
// Each step's RayJob borrows it (clusterSelector) under its own
// submission id, and no step deletes it: `raystep down --dagster-run-id`
// does when the run ends (dagster-raystep's run-status sensor), and
// `raystep gc` once its expiry (the run's timeouts.run) has passed.
const (
	// KindRun is the raystep.dev/kind label of run-scoped clusters.
	KindRun = fleet.KindRun
	// LabelClusterHash is the hash of the cluster section a run-scoped
	// cluster was built from (runner.ClusterHash).
	LabelClusterHash = "raystep.dev/cluster-hash"
)

// ErrClusterMismatch is wrapped when the run-scoped cluster of a name was
// built from another cluster section than the step's: a hash collision
// or someone else's object. Nothing was created or deleted.
var ErrClusterMismatch = errors.New("run-scoped cluster built from another cluster section")

// BuildRunCluster returns the run-scoped RayCluster of spec under profile
// for the Dagster run runID in namespace, expiring at expires: an
// interactive cluster's pods and token, labelled raystep.dev/kind=run with
// the run id and the cluster section's hash.
func BuildRunCluster(spec *schemas.Spec, profile *schemas.Profile, namespace, runID string, expires time.Time) (*rayv1.RayCluster, error) {
	if spec == nil {
		return nil, fmt.Errorf("build run-scoped RayCluster: spec is required")
	}
	hash := runner.ClusterHash(spec.Spec.Cluster)
	s := *spec
	s.Metadata.Name = runner.RunClusterName(runID, hash)
	return buildCluster(&s, profile, namespace, expires, map[string]string{
		LabelKind: KindRun, LabelRunID: LabelValue(runID), LabelClusterHash: hash,
	})
}

// Attach creates the run-scoped cluster rc or attaches to the one of its
// name (Up, which moves its expiry to rc's) and waits until it is ready.
// A cluster of that name with another cluster hash is refused with
// ErrClusterMismatch, one being deleted (its run ended) with an error.
// It never deletes anything: a cluster that fails to become ready stays
// for `down --dagster-run-id` or gc, and the error says why.
func (i *Interactive) Attach(ctx context.Context, rc *rayv1.RayCluster) (*rayv1.RayCluster, bool, error) {
	up, err := i.Up(ctx, rc)
	if err != nil {
		return nil, up.Created, err
	}
	got := up.Cluster
	if h := got.Labels[LabelClusterHash]; got.Labels[LabelKind] != KindRun || h != rc.Labels[LabelClusterHash] {
		return nil, false, fmt.Errorf("RayCluster %s/%s: %w (%s=%s %s=%q, want %s=%s %s=%q)", got.Namespace, got.Name, ErrClusterMismatch,
			LabelKind, got.Labels[LabelKind], LabelClusterHash, h, LabelKind, KindRun, LabelClusterHash, rc.Labels[LabelClusterHash])
	}
	ready, err := i.AwaitReady(ctx, got)
	if err != nil {
		return nil, up.Created, fmt.Errorf("run-scoped RayCluster %s/%s: %w", got.Namespace, got.Name, err)
	}
	return ready, up.Created, nil
}

// ListRunClusters returns the run-scoped clusters of the Dagster run runID
// in namespace (every namespace when empty).
func ListRunClusters(ctx context.Context, i *Interactive, namespace, runID string) ([]rayv1.RayCluster, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByRaystep, LabelKind: KindRun, LabelRunID: LabelValue(runID)}).String()
	list, err := i.Ray.RayV1().RayClusters(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the run-scoped RayClusters of Dagster run %s in %s: %w", runID, where(namespace), err)
	}
	return list.Items, nil
}
