package e2e

import (
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// TestInteractiveRunOnCluster: `raystep run --cluster NAME` runs a whole
// step on the interactive cluster `up` made: its RayJob selects that
// cluster (KubeRay's spec.clusterSelector), no RayCluster of its own is
// ever created, the job succeeds (exit 0), and the cluster, its pods and
// its UID are still there afterwards; `down` under a second step fails
// that step with exit 3, not as a preemption, and leaves nothing.
func TestInteractiveRunOnCluster(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-run-cluster")
	env := interactiveEnv(t)
	mustRaystep(t, env, "up", "-n", ns, "--gpu", "a100-80gb", "--workers", "1", "--name", "erin-dev", "--owner", "erin")
	rc := rayCluster(t, ns, "erin-dev")
	ray := admin(t).Ray.RayV1()
	clusters := added(t, func(o metav1.ListOptions) (watch.Interface, error) { return ray.RayClusters(ns).Watch(t.Context(), o) })
	jobs := added(t, func(o metav1.ListOptions) (watch.Interface, error) { return ray.RayJobs(ns).Watch(t.Context(), o) })

	s := newDagsterStep(t, bin, ns)
	s.args = append(s.args, "--cluster", "erin-dev")
	p := s.start(t)
	if code := p.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("run --cluster exited %d, want 0:\n%s", code, p.out.String())
	}
	for _, o := range clusters() { // a watch from no resource version first adds what exists
		if c := o.(*rayv1.RayCluster); c.UID != rc.UID {
			t.Errorf("the step created RayCluster %s, want none: it borrows erin-dev", c.Name)
		}
	}
	made := jobs()
	if len(made) != 1 {
		t.Fatalf("the step created %d RayJobs, want 1", len(made))
	}
	job := made[0].(*rayv1.RayJob)
	if want := map[string]string{"ray.io/cluster": "erin-dev"}; !maps.Equal(job.Spec.ClusterSelector, want) || job.Spec.RayClusterSpec != nil {
		t.Errorf("the step's RayJob selects %v with its own cluster %v, want %v alone", job.Spec.ClusterSelector, job.Spec.RayClusterSpec != nil, want)
	}
	if msgs, err := os.ReadFile(s.messages); err != nil || !strings.Contains(string(msgs), "which it borrows: the step never deletes it") {
		t.Errorf("run did not tell Dagster it borrows the cluster (%v):\n%s", err, msgs)
	}
	after := rayCluster(t, ns, "erin-dev")
	if after.UID != rc.UID || after.DeletionTimestamp != nil {
		t.Errorf("the borrowed cluster after the step: UID %s (was %s), deleting %v", after.UID, rc.UID, after.DeletionTimestamp != nil)
	}
	onGPUNode(t, ns, "erin-dev")
	if left := leftovers(t.Context(), ns); strings.Contains(left, "RayJob ") {
		t.Errorf("the step left its RayJob: %s", left)
	}

	// Its owner takes the cluster down under a step: the step fails as an
	// infrastructure failure (exit 3), not as a preemption, which Dagster
	// would retry.
	long := newDagsterAttempt(t, bin, ns, s.runID+"-down", 0, `spec.entrypoint=python -c "import time; print('long', flush=True); time.sleep(600)"`)
	long.args = append(long.args, "--cluster", "erin-dev")
	lp := long.start(t)
	waitJobRunning(t, long, lp)
	mustRaystep(t, env, "down", "-n", ns, "erin-dev")
	if code := lp.wait(t, 3*time.Minute); code != 3 || !strings.Contains(lp.out.String(), "RayCluster erin-dev, which the step borrows, is going away") {
		t.Errorf("the step whose borrowed cluster its owner took down exited %d, want 3 (not 75: not a preemption) saying why\n%s", code, lp.out.String())
	}
	nothingLeft(t, ns)
}

// added starts a watch and returns a function giving the objects added
// so far (first, as a watch from no resource version does, the ones that
// exist).
func added(t *testing.T, watchFrom func(metav1.ListOptions) (watch.Interface, error)) func() []runtime.Object {
	t.Helper()
	w, err := watchFrom(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var objs []runtime.Object
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				mu.Lock()
				objs = append(objs, ev.Object)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() []runtime.Object {
		mu.Lock()
		defer mu.Unlock()
		return append([]runtime.Object(nil), objs...)
	}
}
