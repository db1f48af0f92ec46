package kuberay

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// queuedProfile is profile with Kueue queues: one for all steps and one
// for the train example's GPU type.
func queuedProfile(p *schemas.Profile, all, gpu string) *schemas.Profile {
	q := *p
	q.Spec.Queue = all
	q.Spec.GPUTypes = map[string]schemas.GPUType{}
	for name, g := range p.Spec.GPUTypes {
		g.Queue = gpu
		q.Spec.GPUTypes[name] = g
	}
	return &q
}

// TestBuildQueued: a profile queue labels the RayJob with Kueue's
// queue-name and creates it suspended (a GPU type's queue wins over the
// one for all); without one the RayJob is neither.
func TestBuildQueued(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	tests := []struct {
		name, all, gpu string
		want           string
	}{
		{name: "no queue"},
		{name: "queue for all", all: "shared", want: "shared"},
		{name: "GPU type's queue wins", all: "shared", gpu: "a100", want: "a100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job, err := Build(spec, queuedProfile(profile, tt.all, tt.gpu), attempt(spec, identity))
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				Queue   string
				Suspend bool
			}{job.Labels[LabelQueueName], job.Spec.Suspend}
			want := struct {
				Queue   string
				Suspend bool
			}{tt.want, tt.want != ""}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("queue label and suspend (-want +got):\n%s", diff)
			}
			if job.Spec.Suspend && !job.Spec.ShutdownAfterJobFinishes {
				t.Errorf("suspended without shutdownAfterJobFinishes: KubeRay refuses it")
			}
		})
	}
}

// TestQueuedIsNotAFailure: a suspended, then Suspended, RayJob keeps Ready
// waiting (no failure reported) and tells the user once that it is
// queued in its LocalQueue; admission (spec.suspend cleared) ends
// Admitted, says so, and the cluster then gets ready.
func TestQueuedIsNotAFailure(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.Profile = queuedProfile(f.b.Profile, "shared", "")
	c := f.provision(t, request(0))
	for _, st := range []rayv1.JobDeploymentStatus{rayv1.JobDeploymentStatusInitializing, rayv1.JobDeploymentStatusSuspending, rayv1.JobDeploymentStatusSuspended} {
		// KubeRay names a cluster it never creates before it suspends.
		f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: st, RayClusterName: c.name + "-never"})
		await(t, c, string(st), func(v view) bool { return v.job.Status.JobDeploymentStatus == st })
	}
	if err := c.Ready(cancelled(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready while queued = %v, want still waiting", err)
	}
	if err := c.Admitted(cancelled(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Admitted while queued = %v, want still waiting", err)
	}
	select {
	case err := <-c.Failures():
		t.Fatalf("Failures() while queued: %v", err)
	default:
	}
	want := "INFO RayJob " + c.Name() + ": queued in Kueue LocalQueue shared"
	if got := f.allNotes(); countPrefix(got, want) != 1 {
		t.Errorf("notes %q: want exactly one %q", got, want)
	}
	if c.mon.clusterName() != "" {
		t.Errorf("pods of %q watched while queued", c.mon.clusterName())
	}

	job, err := f.ray.RayV1().RayJobs(testNS).Get(t.Context(), c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.Suspend = false // Kueue admits it
	job.Status = rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing, RayClusterName: c.name + "-abcde"}
	if _, err := f.ray.RayV1().RayJobs(testNS).Update(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admitted(t.Context()); err != nil {
		t.Fatalf("Admitted: %v", err)
	}
	f.awaitNote(t, "admitted by Kueue LocalQueue shared after")
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
	if err := c.Ready(t.Context()); err != nil {
		t.Fatalf("Ready after admission: %v", err)
	}
	if got := c.mon.clusterName(); got != c.name+"-abcde" {
		t.Errorf("pods watched of %q, want the admitted cluster's", got)
	}
}

// TestSuspendedAfterReadyFails: a RayJob suspended once its cluster was
// ready (Kueue preempted it) lost its Ray job: an infrastructure failure
// naming the queue.
func TestSuspendedAfterReadyFails(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.Profile = queuedProfile(f.b.Profile, "shared", "")
	c := f.provision(t, request(0))
	job, err := f.ray.RayV1().RayJobs(testNS).Get(t.Context(), c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.Suspend = false
	job.Status = rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"}
	if _, err := f.ray.RayV1().RayJobs(testNS).Update(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(t.Context()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusSuspending, RayClusterName: c.name + "-abcde"})
	err = <-c.Failures()
	var ce *ClusterError
	if !errors.As(err, &ce) || ce.Reason != ReasonPreempted || !errors.Is(err, runner.ErrPreempted) ||
		!strings.Contains(ce.Message, "Kueue LocalQueue shared preempted or evicted it") {
		t.Fatalf("Failures() = %v, want a preemption naming the queue", err)
	}
}

func countPrefix(list []string, prefix string) int {
	n := 0
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// workload is a Kueue Workload of the RayJob with uid that Kueue has not
// admitted, for want of quota.
func workload(uid string) *unstructured.Unstructured {
	wl := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "QuotaReserved", "status": "False", "reason": "Pending",
			"message": "couldn't assign flavors to pod set gpu: insufficient unused quota for nvidia.com/gpu in flavor a100, 1 more needed",
		}}},
	}}
	wl.SetGroupVersionKind(workloadsResource.GroupVersion().WithKind("Workload"))
	wl.SetNamespace(testNS)
	wl.SetName("rayjob-" + uid)
	wl.SetLabels(map[string]string{labelJobUID: uid})
	return wl
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{workloadsResource: "WorkloadList"}, objs...)
}

// TestQueuedTellsKueuesReason: what Kueue says of the step's Workload
// comes with the queued notice, and teardown waits until the Workload is
// gone.
func TestQueuedTellsKueuesReason(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.Profile = queuedProfile(f.b.Profile, "shared", "")
	req := request(0)
	dyn := fakeDynamic(workload(req.ID + "-uid"))
	f.b.Dynamic = dyn
	c := f.provision(t, req)
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusSuspended})
	f.awaitNote(t, "INFO RayJob "+c.Name()+": queued in Kueue LocalQueue shared: Pending: couldn't assign flavors to pod set gpu: insufficient unused quota for nvidia.com/gpu in flavor a100, 1 more needed")
	await(t, c, "Workload seen", func(v view) bool { return len(v.workloads) == 1 })

	if err := f.ray.RayV1().RayJobs(testNS).Delete(t.Context(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := c.awaitGone(ctx)
	if err == nil || !strings.Contains(err.Error(), "Kueue Workload rayjob-"+req.ID+"-uid left") {
		t.Fatalf("teardown with the Workload left = %v, want it named", err)
	}
	if err := dyn.Resource(workloadsResource).Namespace(testNS).Delete(t.Context(), "rayjob-"+req.ID+"-uid", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.awaitGone(t.Context()); err != nil {
		t.Fatalf("teardown once the Workload is gone: %v", err)
	}
}

// TestQueuedWorkloadsForbidden: without the right to read Workloads the
// step is still queued, not failed, and a warning says what it cannot see.
func TestQueuedWorkloadsForbidden(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.Profile = queuedProfile(f.b.Profile, "shared", "")
	dyn := fakeDynamic()
	dyn.PrependReactor("list", "workloads", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(workloadsResource.GroupResource(), "", errors.New("RBAC: access denied"))
	})
	f.b.Dynamic = dyn
	c := f.provision(t, request(0))
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusSuspended})
	f.awaitNote(t, "WARNING cannot watch Workload in "+testNS)
	f.awaitNote(t, "INFO RayJob "+c.Name()+": queued in Kueue LocalQueue shared")
	if err := c.Ready(cancelled(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready while queued without Workload access = %v, want still waiting", err)
	}
}
