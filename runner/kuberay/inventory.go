package kuberay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
)

// ListRayJobs returns raystep's RayJobs (label app.kubernetes.io/managed-by
// =raystep) in namespace, or in every namespace when it is empty, sorted
// by namespace and name.
func ListRayJobs(ctx context.Context, ray rayclient.Interface, namespace string) ([]rayv1.RayJob, error) {
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
func ListLeases(ctx context.Context, kube kubernetes.Interface, namespace string) (map[string]*coordinationv1.Lease, error) {
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

// Summary is one raystep RayJob or interactive RayCluster as `raystep ls`
// shows it.
type Summary struct {
	// Namespace and Name are the RayJob's (or the RayCluster's).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ClusterKind is "step" for a step's RayJob, KindInteractive for an
	// interactive RayCluster: the KIND column.
	ClusterKind string `json:"clusterKind"`
	// Owner is the spec's metadata.owner (the raystep.dev/owner label).
	Owner string `json:"owner"`
	// Kind is the raystep.dev/kind label: the spec's kind (train, eval or
	// batch_inference) for a step, KindInteractive otherwise.
	Kind string `json:"kind"`
	// GPUs is the GPU demand at full size, e.g. "a100-80gb=2".
	GPUs string `json:"gpus"`
	// Deployment is KubeRay's jobDeploymentStatus ("New" before the
	// operator saw it, "Queued" while suspended in a queue, "Deleting" once
	// deletion started).
	Deployment string `json:"deploymentStatus"`
	// Queue is the Kueue LocalQueue the RayJob is queued in (label
	// kueue.x-k8s.io/queue-name), if any.
	Queue string `json:"queue,omitempty"`
	// JobStatus is the Ray job's status as KubeRay last saw it.
	JobStatus string `json:"jobStatus"`
	// Created is when the RayJob was created.
	Created time.Time `json:"created"`
	// Dashboard is the head service's dashboard URL inside the cluster.
	Dashboard string `json:"dashboard"`
	// RunID and Step are the Dagster run and step the RayJob is for.
	RunID string `json:"dagsterRunId"`
	Step  string `json:"dagsterStep"`
	// RayCluster is the RayCluster KubeRay made for the RayJob, once made.
	RayCluster string `json:"rayCluster"`
	// Reason is KubeRay's reason for the RayJob's state (status.reason), e.g.
	// DeadlineExceeded; empty when KubeRay gives none.
	Reason string `json:"reason,omitempty"`
	// Expires is when an interactive cluster expires; nil for steps.
	Expires *time.Time `json:"expires,omitempty"`
	// Notebook says the cluster has a notebook (`up --notebook`), which
	// `raystep notebook NAME` reaches.
	Notebook bool `json:"notebook,omitempty"`
}

// ClusterKindStep is the ClusterKind of a step's RayJob.
const ClusterKindStep = "step"

// Summarize describes job for `raystep ls`.
func Summarize(job *rayv1.RayJob) Summary {
	st := job.Status
	s := Summary{
		Namespace: job.Namespace, Name: job.Name, ClusterKind: ClusterKindStep,
		Owner: job.Labels[LabelOwner], Kind: job.Labels[LabelKind], GPUs: job.Annotations[AnnotationGPUs],
		Deployment: string(st.JobDeploymentStatus), JobStatus: string(st.JobStatus),
		Created: job.CreationTimestamp.UTC(), RunID: job.Labels[LabelRunID],
		Step: job.Annotations[AnnotationStepKey], RayCluster: st.RayClusterName, Reason: string(st.Reason),
		Queue: job.Labels[LabelQueueName],
	}
	if s.Step == "" {
		s.Step = job.Labels[LabelStep]
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

// TableOptions shapes `raystep ls` output.
type TableOptions struct {
	// AllNamespaces adds a NAMESPACE column.
	AllNamespaces bool
	// Wide adds the Dagster run id, step and RayCluster.
	Wide bool
	// Now is the time ages are counted to.
	Now time.Time
}

// WriteTable prints summaries as kubectl-style columns.
func WriteTable(w io.Writer, rows []Summary, o TableOptions) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := []string{"NAME", "KIND", "OWNER", "TYPE", "GPUS", "DEPLOYMENT", "JOB", "AGE", "EXPIRES", "DASHBOARD"}
	if o.AllNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	if o.Wide {
		head = append(head, "DAGSTER-RUN", "STEP", "RAYCLUSTER")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		typ := r.Kind
		if typ == r.ClusterKind {
			typ = "" // an interactive cluster runs no step of a kind
		}
		cols := []string{r.Name, r.ClusterKind, dash(r.Owner), dash(typ), dash(r.GPUs), r.Deployment, dash(r.JobStatus),
			duration.HumanDuration(o.Now.Sub(r.Created)), expires(r.Expires, o.Now), dash(r.Dashboard)}
		if o.AllNamespaces {
			cols = append([]string{dash(r.Namespace)}, cols...) // none for a local cluster
		}
		if o.Wide {
			cols = append(cols, dash(r.RunID), dash(r.Step), dash(r.RayCluster))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// WriteJSON prints summaries as a JSON array.
func WriteJSON(w io.Writer, rows []Summary) error {
	if rows == nil {
		rows = []Summary{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// expires shows an expiry as "in 3h" or "5m ago"; "-" for none.
func expires(t *time.Time, now time.Time) string {
	switch {
	case t == nil:
		return "-"
	case t.After(now):
		return "in " + duration.HumanDuration(t.Sub(now))
	}
	return duration.HumanDuration(now.Sub(*t)) + " ago"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ServerNow reads the API server's clock, to the second: the creation time
// it gives a Lease created in namespace as a dry run (nothing is stored;
// it needs create on leases, which steps have). gc judges heartbeats by it,
// as the server records their renewals (renewTime), so that no machine's
// clock, gc's or a step's, decides whether a step is alive.
func ServerNow(ctx context.Context, kube kubernetes.Interface, namespace string) (time.Time, error) {
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
