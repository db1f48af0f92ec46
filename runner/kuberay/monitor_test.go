package kuberay

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/raystep/raystep/runner"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reenter calls monitor methods that take its lock from another goroutine
// and reports whether they returned within a bound that only catches a
// hang: called by a Notify that runs under the lock, they would wait for
// the Notify that waits for them.
func reenter(c *Cluster) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.mon.clusterName()
		_, _ = c.headPod()
		_ = c.mon.latestJob()
	}()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// TestNotifyRunsOutsideTheLock: every kind of note the monitor sends (a
// RayJob status change, a RayCluster's replica failure, a warning event,
// a broken worker after Ready) reaches a Notify that calls back into the
// monitor, and none of them is sent while the monitor holds its lock.
func TestNotifyRunsOutsideTheLock(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	var cluster atomic.Pointer[Cluster]
	var underLock atomic.Pointer[string]
	notify := f.b.Notify
	f.b.Notify = func(level, msg string) {
		if c := cluster.Load(); c != nil && underLock.Load() == nil && !reenter(c) {
			underLock.Store(&msg)
		}
		notify(level, msg)
	}
	c := f.provision(t, request(0))
	cluster.Store(c)
	f.initializing(t, c)
	f.awaitNote(t, "INFO RayJob "+c.Name()+": Initializing")

	st := rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing, RayClusterName: c.name + "-abcde"}
	st.RayClusterStatus.Conditions = []metav1.Condition{{Type: string(rayv1.RayClusterReplicaFailure), Status: "True",
		Reason: "FailedCreateWorkerPod", Message: "exceeded quota"}}
	f.setStatus(t, c.name, st)
	f.awaitNote(t, "WARNING RayCluster "+c.name+"-abcde: FailedCreateWorkerPod: exceeded quota")

	f.awaitWatch(t, "events")
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: c.name + "-abcde.2", Namespace: testNS},
		InvolvedObject: corev1.ObjectReference{Kind: "RayCluster", Name: c.name + "-abcde", Namespace: testNS},
		Type:           corev1.EventTypeWarning, Reason: "FailedScheduling", Message: "0/2 nodes are available",
	}
	if _, err := f.kube.CoreV1().Events(testNS).Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.awaitNote(t, "WARNING RayCluster "+c.name+"-abcde: FailedScheduling: 0/2 nodes are available")

	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
	if err := c.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.addPod(t, c, "pod-worker", "worker", waiting("CrashLoopBackOff", "back-off"))
	f.awaitNote(t, "pod-worker: CrashLoopBackOff")
	if msg := underLock.Load(); msg != nil {
		t.Errorf("Notify(%q) ran while the monitor held its lock", *msg)
	}
}

// TestUnschedulableGraceOnTheClock: the Unschedulable grace is measured
// on the backend's clock: a pod is given the whole minute of it however
// long the test takes, and Ready and Failures report it the moment the
// clock passes the minute, without a change to wake them.
func TestUnschedulableGraceOnTheClock(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	clock := f.fakeClock()
	f.b.UnschedulableGrace = time.Minute
	c := f.provision(t, request(0))
	f.initializing(t, c)
	st := unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
	st.Conditions[0].LastTransitionTime = metav1.NewTime(clock.Now())
	f.addPod(t, c, "pod-worker", "worker", st)
	await(t, c, "unschedulable pod seen", func(v view) bool { return len(v.pods) == 1 })

	done := make(chan error, 1)
	go func() { done <- c.Ready(t.Context()) }()
	clock.awaitTimers(t, 2) // Ready and Failures look again when the grace ends
	clock.Advance(time.Minute - time.Second)
	if err := c.Ready(cancelled(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready a second before the grace ends = %v, want still waiting", err)
	}
	clock.Advance(time.Second)
	var ce *ClusterError
	select {
	case err := <-done:
		if !errors.As(err, &ce) || ce.Reason != "Unschedulable" || ce.Pod != "pod-worker" {
			t.Fatalf("Ready once the grace ended = %v, want Unschedulable on pod-worker", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ready still waiting 10s after the grace ended on the clock")
	}
	select {
	case err := <-c.Failures():
		if err.Error() != ce.Error() {
			t.Errorf("Failures() = %v, want %v", err, ce)
		}
	case <-time.After(10 * time.Second):
		t.Error("Failures() reported nothing 10s after the grace ended on the clock")
	}
}

// TestDisruptedPodIsAPreemption: once the cluster is ready, a worker pod
// the API server marks DisruptionTarget (here, as the eviction API does)
// is reported on Failures as a preemption naming the pod and why, and
// Disruption keeps saying so after the pod is gone; a worker that
// crash-loops is only a warning, and a disruption before Ready is not a
// preemption of the job.
func TestDisruptedPodIsAPreemption(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	f.initializing(t, c)
	disrupted := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget,
		Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}}
	f.addPod(t, c, "pod-early", "worker", disrupted)
	await(t, c, "the early pod seen", func(v view) bool { return len(v.pods) == 1 })
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
	if err := c.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Disruption(); err != nil {
		t.Fatalf("Disruption() after a pod disrupted before Ready = %v, want nil", err)
	}
	if err := f.kube.CoreV1().Pods(testNS).Delete(t.Context(), "pod-early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	f.addPod(t, c, "pod-crash", "worker", waiting("CrashLoopBackOff", "back-off"))
	f.awaitNote(t, "pod-crash: CrashLoopBackOff")
	f.addPod(t, c, "pod-worker", "worker", disrupted)
	select {
	case err := <-c.Failures():
		var ce *ClusterError
		if !errors.As(err, &ce) || !errors.Is(err, runner.ErrPreempted) || ce.Pod != "pod-worker" ||
			ce.Message != "EvictionByEvictionAPI: Eviction API: evicting" {
			t.Fatalf("Failures() = %v, want a preemption of pod-worker by the eviction API", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Failures() reported nothing 30s after a worker was disrupted")
	}
	if err := f.kube.CoreV1().Pods(testNS).Delete(t.Context(), "pod-worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, c, "the pod gone", func(v view) bool { return len(v.pods) == 1 })
	if err := c.Disruption(); !errors.Is(err, runner.ErrPreempted) {
		t.Errorf("Disruption() after the disrupted pod is gone = %v, want the preemption", err)
	}
}

// TestDisruptionDuringTeardownIsNotAPreemption: once teardown began, a
// pod marked DisruptionTarget (an eviction racing the step's own delete,
// a node drained meanwhile) changes nothing: the job's outcome was
// decided before, and a step that succeeded stays succeeded.
func TestDisruptionDuringTeardownIsNotAPreemption(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.ready(t)
	c.mon.markLeaving() // what Teardown does first
	f.addPod(t, c, "pod-evicted", "worker", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}})
	await(t, c, "the evicted pod seen", func(v view) bool { return len(v.pods) == 1 })
	if err := c.Disruption(); err != nil {
		t.Errorf("Disruption() after a pod was evicted during teardown = %v, want nil", err)
	}
	select {
	case err := <-c.Failures():
		t.Errorf("Failures() reported %v for an eviction during teardown", err)
	default:
	}
}
