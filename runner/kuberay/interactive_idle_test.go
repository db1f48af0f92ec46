package kuberay

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
)

// idleCluster is an interactive cluster made 2h before gcNow with a CPU
// group and a GPU group of two workers, idle release after 30m and
// deletion after 90m.
func idleCluster(name string) *rayv1.RayCluster {
	rc := clusterAt(name, 2*time.Hour, "2026-11-30T20:00:00Z")
	SetIdle(rc.Annotations, fleet.Idle{Release: 30 * time.Minute, Stop: 90 * time.Minute}, gcNow.Add(-2*time.Hour))
	group := func(name string, res corev1.ResourceList) rayv1.WorkerGroupSpec {
		return rayv1.WorkerGroupSpec{GroupName: name, Replicas: ptr(int32(2)), MinReplicas: ptr(int32(1)), MaxReplicas: ptr(int32(2)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker",
				Resources: corev1.ResourceRequirements{Limits: res}}}}}}
	}
	rc.Spec.WorkerGroupSpecs = []rayv1.WorkerGroupSpec{
		group("cpu", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}),
		group("gpu", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("1")}),
	}
	return rc
}

// TestJudgeIdle: a busy cluster is kept whatever its age; an idle one is
// released once idle for --idle and deleted once idle for --idle-stop,
// idleness counted from the latest of its creation, its last up, its
// last job's end and its notebook's last activity.
func TestJudgeIdle(t *testing.T) {
	t.Parallel()
	released := idleCluster("released")
	released.Annotations[AnnotationReleased] = `[{"group":"gpu","replicas":2,"minReplicas":1}]`
	upAgo := func(d time.Duration) *rayv1.RayCluster {
		rc := idleCluster("upped")
		rc.Annotations[AnnotationActiveAt] = gcNow.Add(-d).Format(time.RFC3339)
		return rc
	}
	cpuOnly := idleCluster("cpu-only")
	cpuOnly.Spec.WorkerGroupSpecs = cpuOnly.Spec.WorkerGroupSpecs[:1]
	tests := []struct {
		name          string
		rc            *rayv1.RayCluster
		a             notebook.Activity
		release, stop bool
		reason        string
	}{
		{"busy job", idleCluster("a"), notebook.Activity{Busy: "Ray job x is RUNNING"}, false, false, "in use: Ray job x is RUNNING"},
		{"job ended 10m ago", idleCluster("b"), notebook.Activity{Last: gcNow.Add(-10 * time.Minute)}, false, false,
			"idle for 10m0s: GPU workers released in 20m0s, deleted in 1h20m0s"},
		{"job ended 40m ago", idleCluster("c"), notebook.Activity{Last: gcNow.Add(-40 * time.Minute)}, true, false,
			"idle for 40m0s (since 2026-11-30T11:20:00Z), past --idle 30m0s"},
		{"never used", idleCluster("d"), notebook.Activity{}, false, true,
			"idle for 2h0m0s (since 2026-11-30T10:00:00Z), past --idle-stop 1h30m0s"},
		{"up again 5m ago", upAgo(5 * time.Minute), notebook.Activity{}, false, false,
			"idle for 5m0s: GPU workers released in 25m0s, deleted in 1h25m0s"},
		{"released, idle on", released, notebook.Activity{Last: gcNow.Add(-time.Hour)}, false, false,
			"idle for 1h0m0s, GPU workers released (raystep up released brings them back)"},
		{"nothing to release", cpuOnly, notebook.Activity{Last: gcNow.Add(-time.Hour)}, false, false,
			"idle for 1h0m0s: no GPU workers to release, deleted in 30m0s"},
		{"clock ahead", idleCluster("e"), notebook.Activity{Last: gcNow.Add(time.Hour)}, false, false,
			"idle for 0s: GPU workers released in 30m0s, deleted in 1h30m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := JudgeIdle(tt.rc, tt.a, gcNow)
			if diff := cmp.Diff([]any{tt.release, tt.stop, tt.reason}, []any{v.Release, v.Stop, v.Reason}); diff != "" {
				t.Errorf("release, stop, reason (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReleaseAndRestore: release scales the GPU group alone to zero and
// remembers it; restore puts back replicas and minReplicas and forgets.
func TestReleaseAndRestore(t *testing.T) {
	t.Parallel()
	rc := idleCluster("dev")
	f := newFakes(t, rc)
	i := &Interactive{Kube: kubeapitest.Kube(f.kube), Ray: kubeapitest.Ray(f.ray)}
	n, err := i.Release(t.Context(), rc)
	if err != nil || n != 2 {
		t.Fatalf("Release = %d, %v; want 2 workers", n, err)
	}
	got, err := f.ray.RayV1().RayClusters(testNS).Get(t.Context(), "dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shape := func(rc *rayv1.RayCluster) []int32 {
		var out []int32
		for _, g := range rc.Spec.WorkerGroupSpecs {
			out = append(out, *g.Replicas, *g.MinReplicas)
		}
		return out
	}
	if diff := cmp.Diff([]any{[]int32{2, 1, 0, 0}, true}, []any{shape(got), Released(got)}); diff != "" {
		t.Errorf("after release (-want +got):\n%s", diff)
	}
	if s := SummarizeCluster(got); s.GPUsHeld != "" || !s.Released {
		t.Errorf("ls of a released cluster: held %q, released %v; want none held", s.GPUsHeld, s.Released)
	}
	back, restored, err := i.Restore(t.Context(), got, gcNow)
	if err != nil || !restored {
		t.Fatalf("Restore = %v, %v", restored, err)
	}
	if diff := cmp.Diff([]any{[]int32{2, 1, 2, 1}, false, gcNow.Format(time.RFC3339)},
		[]any{shape(back), Released(back), back.Annotations[AnnotationActiveAt]}); diff != "" {
		t.Errorf("after restore (-want +got):\n%s", diff)
	}
	other := idleCluster("dev")
	other.UID = "another-uid"
	if _, err := i.Release(t.Context(), other); err == nil {
		t.Error("Release of a RayCluster replaced meanwhile (another uid) succeeded")
	}
}
