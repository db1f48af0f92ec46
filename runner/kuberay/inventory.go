package kuberay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// ListRayJobs returns raystep's RayJobs (label app.kubernetes.io/managed-by
// =raystep) in namespace, or in every namespace when it is empty, sorted
// by namespace and name.
func ListRayJobs(ctx context.Context, ray kubeapi.RayInterface, namespace string) ([]rayv1.RayJob, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByRaystep}).String()
	list, err := ray.RayV1().RayJobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list raystep RayJobs in %s: %w", where(namespace), err)
	}
	jobs := list.Items
	slices.SortFunc(jobs, func(a, b rayv1.RayJob) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return jobs, nil
}

// ListLeases returns raystep's heartbeat Leases (same label) in namespace,
// or in every namespace when it is empty, by "namespace/name".
func ListLeases(ctx context.Context, kube kubeapi.Interface, namespace string) (map[string]*coordinationv1.Lease, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByRaystep}).String()
	list, err := kube.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list raystep heartbeat Leases in %s: %w", where(namespace), err)
	}
	out := make(map[string]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		l := &list.Items[i]
		out[l.Namespace+"/"+l.Name] = l
	}
	return out, nil
}

// JudgeAll judges each RayJob with its heartbeat Lease from leases (see
// ListLeases), in order.
func JudgeAll(jobs []rayv1.RayJob, leases map[string]*coordinationv1.Lease, now time.Time, o JudgeOptions) []Verdict {
	out := make([]Verdict, len(jobs))
	for i := range jobs {
		out[i] = Judge(&jobs[i], leases[jobs[i].Namespace+"/"+jobs[i].Name], now, o)
	}
	return out
}

// where names a namespace, or all of them, for errors.
func where(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}

// Summarize describes job for `raystep ls`.
func Summarize(job *rayv1.RayJob) fleet.Record {
	st := job.Status
	s := fleet.Record{
		Backend: fleet.BackendKubeRay, Namespace: job.Namespace, Name: job.Name, ClusterKind: fleet.KindStep,
		Owner: job.Labels[LabelOwner], Kind: job.Labels[LabelKind], GPUs: job.Annotations[AnnotationGPUs],
		Deployment: string(st.JobDeploymentStatus), JobStatus: string(st.JobStatus),
		Created: job.CreationTimestamp.UTC(), RunID: job.Labels[LabelRunID],
		Step: job.Annotations[AnnotationStepKey], RayCluster: st.RayClusterName, Reason: string(st.Reason),
		Queue: job.Labels[LabelQueueName], Asset: job.Annotations[AnnotationAssetKey],
	}
	if s.Step == "" {
		s.Step = job.Labels[LabelStep]
	}
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusSuspended {
		s.GPUsHeld = s.GPUs // a RayJob suspended in a queue has no pods
	}
	if s.Deployment == "" {
		s.Deployment = "New"
	}
	if suspended(job) {
		s.Deployment = "Queued"
		if s.Queue != "" {
			s.Deployment += " (" + s.Queue + ")"
		}
		s.RayCluster = "" // named by KubeRay, never created while suspended
	}
	if job.DeletionTimestamp != nil {
		s.Deployment = "Deleting"
	}
	if st.DashboardURL != "" {
		s.Dashboard = "http://" + strings.TrimPrefix(st.DashboardURL, "http://")
	}
	return s
}

// ServerNow reads the API server's clock, to the second: the creation time
// it gives a Lease created in namespace as a dry run (nothing is stored;
// it needs create on leases, which steps have). gc judges heartbeats by it,
// as the server records their renewals (renewTime), so that no machine's
// clock, gc's or a step's, decides whether a step is alive.
func ServerNow(ctx context.Context, kube kubeapi.Interface, namespace string) (time.Time, error) {
	probe := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "raystep-clock-"}}
	got, err := kube.CoordinationV1().Leases(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the API server's clock (a dry-run create of a Lease in namespace %s): %w", namespace, err)
	}
	if got.CreationTimestamp.IsZero() {
		return time.Time{}, fmt.Errorf("read the API server's clock: its dry-run Lease in namespace %s has no creation time", namespace)
	}
	return got.CreationTimestamp.Time, nil
}
