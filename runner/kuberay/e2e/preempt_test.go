package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/raysubmit"
)

// TestBinaryWorkerEvictedMidRun: the built raystep runs a step whose job
// is running; its GPU worker pod is evicted through the Eviction API (as
// a drain or the node-pressure eviction does), and the API server marks
// it DisruptionTarget. raystep fails the step as preempted, exit 75,
// naming the pod and the reason, stops the job and deletes everything.
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
}
