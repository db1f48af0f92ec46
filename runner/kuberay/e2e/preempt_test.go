package e2e

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
)

// TestBinaryWorkerEvictedMidRun: the built raystep runs a step whose job
// is running; its GPU worker pod is evicted through the Eviction API (as
// a drain or the node-pressure eviction does), and the API server marks
// it DisruptionTarget. raystep fails the step as preempted, exit 75,
// naming the pod and the reason, stops the job and deletes everything;
// the retry Dagster then starts (the next retry number) runs as a new
// RayJob and succeeds.
func TestBinaryWorkerEvictedMidRun(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-bin-evicted")
	s := newDagsterStep(t, bin, ns, `spec.entrypoint=python -c "import time; print('training', flush=True); time.sleep(120)"`)
	p := s.start(t)
	waitJobRunning(t, s, p)

	var pods corev1.PodList
	if err := shared.k8s.Client.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"ray.io/node-type": "worker"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d worker pods in %s, want 1", len(pods.Items), ns)
	}
	worker := pods.Items[0].Name
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: worker, Namespace: ns}}
	if err := shared.k8s.Clientset.CoreV1().Pods(ns).EvictV1(ctx, eviction); err != nil {
		t.Fatalf("evict %s: %v", worker, err)
	}
	if code := p.wait(t, 3*time.Minute); code != 75 {
		t.Fatalf("raystep exited %d after its worker was evicted, want 75 (preempted)\n%s", code, p.out.String())
	}
	out := p.out.String()
	if !strings.Contains(out, "pod "+worker+": Preempted: EvictionByEvictionAPI") {
		t.Errorf("raystep's output does not name the evicted pod and the reason:\n%s", out)
	}
	if jobs := stepJobs(t, s.runID); len(jobs) != 1 || jobs[0].Status != raysubmit.StatusStopped {
		t.Errorf("Ray jobs of the run after the eviction: %+v, want one, STOPPED", jobs)
	}
	nothingLeft(t, ns)
	if r := onlyRecord(t, s); r.Reason != "preempted" || r.ExitCode != 75 || !strings.Contains(r.Error, worker) {
		t.Errorf("the step's record: %+v, want preempted, exit 75, naming %s", r, worker)
	}

	retry := newDagsterAttempt(t, bin, ns, s.runID, 1, `spec.entrypoint=python -c "print('retried', flush=True)"`)
	if retry.id == s.id {
		t.Fatalf("the retry's RayJob is named %s, like the preempted attempt's", retry.id)
	}
	if code := retry.start(t).wait(t, 3*time.Minute); code != 0 {
		t.Errorf("the retry after the preemption exited %d, want 0", code)
	}
	nothingLeft(t, ns)
}

// TestNodeLostMidRun: a step's GPU worker runs on a node that goes away
// while the job runs (its Node deleted, as a cloud's autoscaler or a spot
// reclaim does); the pod garbage collector deletes the pod, marking it
// DisruptionTarget, and the step ends as preempted (runner.ErrPreempted:
// the binary's exit 75), naming the pod and the reason, with nothing
// left. The node is the test's own, tainted so that no other test's pod
// lands on it.
func TestNodeLostMidRun(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-node-lost")
	gpu := shared.profile.Spec.GPUTypes["a100-80gb"]
	node := nodes(shared.profile)[0]
	node.Name = ns + "-gpu"
	node.Labels = maps.Clone(gpu.NodeSelector)
	node.Labels["raystep-e2e/node"] = ns
	own := corev1.Taint{Key: "raystep-e2e/node", Value: ns, Effect: corev1.TaintEffectNoSchedule}
	node.Taints = append(slices.Clone(node.Taints), own)
	if err := shared.k8s.AddNode(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = shared.k8s.Clientset.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})

	b := backend(t, spec(t, `spec.entrypoint=python -c "import time; print('training', flush=True); time.sleep(600)"`), ns, nil, nil)
	b.Customize = func(j *rayv1.RayJob) {
		w := &j.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec
		w.NodeSelector = maps.Clone(w.NodeSelector)
		w.NodeSelector["raystep-e2e/node"] = ns
		w.Tolerations = append(w.Tolerations, corev1.Toleration{Key: own.Key, Operator: corev1.TolerationOpEqual, Value: own.Value, Effect: own.Effect})
	}
	st := runner.Resolve(step(b.Spec, runID(t)), nil)
	run := startStep(t.Context(), newRunner(t, b), st)
	awaitJobStatus(t, ns, st.ID, rayv1.JobStatusRunning, run.done)
	var pods corev1.PodList
	if err := shared.k8s.Client.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"ray.io/node-type": "worker"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != node.Name {
		t.Fatalf("worker pods %d, the first on %q; want one, on %s", len(pods.Items), pods.Items[0].Spec.NodeName, node.Name)
	}
	worker := pods.Items[0].Name
	if err := shared.k8s.Clientset.CoreV1().Nodes().Delete(t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	run.wait(t)
	if !errors.Is(run.err, runner.ErrPreempted) || !strings.Contains(run.err.Error(), "pod "+worker+": Preempted: DeletionByPodGC") {
		t.Errorf("the step whose node went away ended with %v, want a preemption naming pod %s and DeletionByPodGC", run.err, worker)
	}
	nothingLeft(t, ns)
}
