package kuberay

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// ListClusters returns raystep's interactive RayClusters (labels
// app.kubernetes.io/managed-by=raystep and raystep.dev/kind=interactive,
// or run for run-scoped ones;
// the RayClusters of steps' RayJobs are not among them) in namespace, or
// in every namespace when it is empty, sorted by namespace and name.
func ListClusters(ctx context.Context, ray kubeapi.RayInterface, namespace string) ([]rayv1.RayCluster, error) {
	list, err := ray.RayV1().RayClusters(namespace).List(ctx, metav1.ListOptions{LabelSelector: ClusterSelector})
	if err != nil {
		return nil, fmt.Errorf("list raystep interactive RayClusters in %s: %w", where(namespace), err)
	}
	clusters := list.Items
	slices.SortFunc(clusters, func(a, b rayv1.RayCluster) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return clusters, nil
}

// ClusterSelector selects raystep's own RayClusters, interactive and
// run-scoped (IsInteractive), as ls and the ui list them.
const ClusterSelector = LabelManagedBy + "=" + ManagedByRaystep + "," + LabelKind + " in (" + KindInteractive + "," + KindRun + ")"

// SummarizeCluster describes the interactive cluster rc for `raystep ls`.
func SummarizeCluster(rc *rayv1.RayCluster) fleet.Record {
	s := fleet.Record{
		Backend: fleet.BackendKubeRay, Namespace: rc.Namespace, Name: rc.Name, ClusterKind: rc.Labels[LabelKind],
		Owner: rc.Labels[LabelOwner], Kind: rc.Labels[LabelKind], GPUs: rc.Annotations[AnnotationGPUs],
		Deployment: string(rc.Status.State), Created: rc.CreationTimestamp.UTC(),
		Dashboard: ClusterDashboardURL(rc), RayCluster: rc.Name, Reason: rc.Status.Reason,
		Notebook: rc.Annotations[AnnotationNotebook] != "",
	}
	switch {
	case rc.DeletionTimestamp != nil:
		s.Deployment = "Deleting"
	case clusterReady(rc):
		s.Deployment = string(rayv1.Ready)
	case s.Deployment == "":
		s.Deployment = "New"
	}
	if t, ok := Expiry(rc); ok {
		t = t.UTC()
		s.Expires = &t
	}
	s.Released = Released(rc)
	if !s.Released {
		s.GPUsHeld = s.GPUs
	}
	if t, ok := IdleSince(rc); ok {
		t = t.UTC()
		s.IdleSince = &t
	}
	return s
}
