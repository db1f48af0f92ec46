package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
	"github.com/raystep/raystep/test/cluster"
)

// kueue starts the real Kueue manager in the shared environment once.
var kueue struct {
	once sync.Once
	err  error
}

func setupKueue(t *testing.T) {
	t.Helper()
	setup(t)
	kueue.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		kueue.err = shared.k8s.StartKueue(ctx)
		t.Logf("Kueue started in %s", time.Since(start).Round(time.Millisecond))
	})
	if kueue.err != nil {
		t.Fatalf("start Kueue: %v", kueue.err)
	}
}

// oneGPUQueue creates, for the test, a ClusterQueue with quota for
// exactly one A100 worker of testdata/step.yaml (and CPU and memory for
// three heads and that worker) and its LocalQueue "gpu" in ns; the test's
// cleanup deletes them and checks that no Workload is left.
func oneGPUQueue(t *testing.T, ns string) { oneGPUQueueWith(t, ns, nil) }

// oneGPUQueueWith is oneGPUQueue with the ClusterQueue's preemption
// policy (nil for Kueue's default: none).
func oneGPUQueueWith(t *testing.T, ns string, preemption map[string]any) {
	t.Helper()
	a100 := shared.profile.Spec.GPUTypes["a100-80gb"]
	labels := map[string]any{}
	for k, v := range a100.NodeSelector {
		labels[k] = v
	}
	cpuFlavor, gpuFlavor, cq := ns+"-cpu", ns+"-a100", ns+"-one-gpu"
	objs := []*unstructured.Unstructured{
		cluster.KueueObject("ResourceFlavor", "", cpuFlavor, map[string]any{}),
		cluster.KueueObject("ResourceFlavor", "", gpuFlavor, map[string]any{"nodeLabels": labels}),
		cluster.KueueObject("ClusterQueue", "", cq, map[string]any{
			"preemption":        preemption,
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{
				cluster.ResourceGroup(cluster.FlavorQuota{Flavor: cpuFlavor, Quota: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("7"), corev1.ResourceMemory: resource.MustParse("22Gi")}}),
				cluster.ResourceGroup(cluster.FlavorQuota{Flavor: gpuFlavor, Quota: corev1.ResourceList{
					corev1.ResourceName(a100.ResourceName): resource.MustParse("1")}}),
			},
		}),
		cluster.KueueObject("LocalQueue", ns, "gpu", map[string]any{"clusterQueue": cq}),
	}
	if err := shared.k8s.CreateKueueObjects(t.Context(), objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if left := workloads(ctx, t, ns); len(left) > 0 {
			t.Errorf("Kueue Workloads left in %s: %v", ns, left)
		}
		for i := len(objs) - 1; i >= 0; i-- {
			if err := shared.k8s.Client.Delete(ctx, objs[i]); err != nil {
				t.Errorf("delete %s %s: %v", objs[i].GetKind(), objs[i].GetName(), err)
			}
		}
	})
}

// workloads lists the names of the Kueue Workloads in ns.
func workloads(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(cluster.KueueAPIVersion)
	list.SetKind("WorkloadList")
	if err := shared.k8s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatalf("list Workloads: %v", err)
	}
	var names []string
	for _, w := range list.Items {
		names = append(names, w.GetName())
	}
	return names
}

// queuedProfile is the shared profile with the A100 pool behind the
// LocalQueue "gpu".
func queuedProfile() *schemas.Profile {
	p := *shared.profile
	p.Spec.GPUTypes = map[string]schemas.GPUType{}
	for name, g := range shared.profile.Spec.GPUTypes {
		if name == "a100-80gb" {
			g.Queue = "gpu"
		}
		p.Spec.GPUTypes[name] = g
	}
	return &p
}

// events records a step's events and lets the test wait for one.
type events struct {
	t       *testing.T
	name    string
	mu      sync.Mutex
	msgs    []string
	changed chan struct{}
}

func newEvents(t *testing.T, name string) *events {
	return &events{t: t, name: name, changed: make(chan struct{})}
}

// Event records e.
func (e *events) Event(ev runner.Event) {
	e.t.Logf("%s: %s %s: %s", e.name, ev.Phase, ev.Kind, ev.Message)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.msgs = append(e.msgs, string(ev.Kind)+" "+ev.Message)
	close(e.changed)
	e.changed = make(chan struct{})
}

// count returns how many recorded events contain s.
func (e *events) count(s string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, m := range e.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// await waits until an event contains s; the bound only catches a hang.
func (e *events) await(t *testing.T, s string) {
	t.Helper()
	timeout := time.NewTimer(3 * time.Minute)
	defer timeout.Stop()
	for {
		e.mu.Lock()
		changed := e.changed
		e.mu.Unlock()
		if e.count(s) > 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("%s: no event containing %q in 3m; events: %q", e.name, s, e.msgs)
		}
	}
}

// queuedStep is a step of testdata/step.yaml under the queued profile,
// running entrypoint, with its events recorded.
type queuedStep struct {
	name   string
	b      *kuberay.Backend
	ev     *events
	step   runner.Step
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

func startQueued(t *testing.T, ns, name, entrypoint string) *queuedStep {
	t.Helper()
	return startQueuedWith(t, ns, name, entrypoint, nil)
}

// startQueuedWith is startQueued with customize applied to the RayJob.
func startQueuedWith(t *testing.T, ns, name, entrypoint string, customize func(*rayv1.RayJob)) *queuedStep {
	t.Helper()
	b := backend(t, spec(t, "spec.entrypoint="+entrypoint), ns, nil, nil)
	b.Profile = queuedProfile()
	b.Customize = customize
	ctx, cancel := context.WithCancel(t.Context())
	q := &queuedStep{name: name, b: b, ev: newEvents(t, name), step: step(b.Spec, runID(t)+"-"+name), done: make(chan struct{}), cancel: cancel}
	r := newRunner(t, b)
	r.Events = q.ev
	go func() {
		defer close(q.done)
		_, q.err = r.Run(ctx, q.step)
	}()
	t.Cleanup(func() { cancel(); <-q.done })
	return q
}

// wait waits for the step's end; the bound only catches a hang.
func (q *queuedStep) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-q.done:
		return q.err
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s did not end in 5m", q.name)
		return nil
	}
}

// lsRow returns what `raystep ls` shows of the step's RayJob.
func lsRow(t *testing.T, ns string, q *queuedStep) (fleet.Record, bool) {
	t.Helper()
	jobs, err := kuberay.ListRayJobs(t.Context(), q.b.Ray, ns)
	if err != nil {
		t.Fatal(err)
	}
	id := runner.Resolve(q.step, nil).ID
	for i := range jobs {
		if jobs[i].Name == id {
			return kuberay.Summarize(&jobs[i]), true
		}
	}
	return fleet.Record{}, false
}

// TestKueueHoldsTheSecondStep runs steps behind the real Kueue controller
// with a ClusterQueue that has room for one GPU worker: the first step is
// admitted and runs; a second and a third, started while it runs, are
// held queued (their events name the LocalQueue and Kueue's reason; ls
// shows them Queued); the third is cancelled while queued and leaves
// nothing (no RayJob, RayCluster, pod or Workload); the second runs once
// the first ended.
func TestKueueHoldsTheSecondStep(t *testing.T) {
	t.Parallel()
	setupKueue(t)
	ns := namespace(t, "e2e-kueue")
	oneGPUQueue(t, ns)
	release := filepath.Join(t.TempDir(), "release")
	hold := `python -c "import os,time; [time.sleep(0.1) for _ in iter(lambda: os.path.exists('` + release + `'), True)]; print('first done')"`
	first := startQueued(t, ns, "first", hold)
	first.ev.await(t, "admitted by Kueue LocalQueue gpu")
	first.ev.await(t, "submitted")

	second := startQueued(t, ns, "second", `python -c "print('second done')"`)
	third := startQueued(t, ns, "third", `python -c "print('third never runs')"`)
	for _, q := range []*queuedStep{second, third} {
		q.ev.await(t, "queued in Kueue LocalQueue gpu: ")
		if row, ok := lsRow(t, ns, q); !ok || row.Deployment != "Queued (gpu)" {
			t.Errorf("ls shows %s as %+v, want Queued (gpu)", q.name, row)
		}
	}

	third.cancel()
	if err := third.wait(t); !errors.Is(err, runner.ErrCancelled) {
		t.Errorf("cancelled queued step: %v, want a cancellation", err)
	}
	if _, ok := lsRow(t, ns, third); ok {
		t.Errorf("the cancelled step's RayJob is still listed")
	}
	for _, w := range workloads(t.Context(), t, ns) {
		if strings.Contains(w, runner.Resolve(third.step, nil).ID) {
			t.Errorf("the cancelled step's Workload %s is left", w)
		}
	}
	if second.ev.count("admitted by Kueue") > 0 {
		t.Fatalf("second step admitted while the first holds the quota")
	}

	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := first.wait(t); err != nil {
		t.Fatalf("first step: %v", err)
	}
	if err := second.wait(t); err != nil {
		t.Fatalf("second step: %v", err)
	}
	if n := second.ev.count("queued in Kueue LocalQueue gpu"); n < 1 || n > 3 {
		t.Errorf("second step told queued %d times, want once and again only when Kueue's reason changed", n)
	}
	second.ev.await(t, "admitted by Kueue LocalQueue gpu")
	nothingLeft(t, ns)
}

// TestKueuePreemptsALowerPriorityStep: behind a ClusterQueue that preempts
// lower priorities, a running step of low priority is preempted by Kueue
// when a step of high priority needs its GPU: the low one ends as
// preempted (runner.ErrPreempted: the binary's exit 75, which Dagster
// retries), saying that
// Kueue's LocalQueue did it, and the high one is admitted and succeeds.
func TestKueuePreemptsALowerPriorityStep(t *testing.T) {
	t.Parallel()
	setupKueue(t)
	ns := namespace(t, "e2e-kueue-preempt")
	oneGPUQueueWith(t, ns, map[string]any{"withinClusterQueue": "LowerPriority"})
	priority := func(name string, value int64) string {
		pc := &unstructured.Unstructured{Object: map[string]any{"value": value, "description": "raystep e2e"}}
		pc.SetAPIVersion(cluster.KueueAPIVersion)
		pc.SetKind("WorkloadPriorityClass")
		pc.SetName(ns + "-" + name)
		if err := shared.k8s.Client.Create(t.Context(), pc); err != nil {
			t.Fatalf("create WorkloadPriorityClass: %v", err)
		}
		t.Cleanup(func() { _ = shared.k8s.Client.Delete(context.Background(), pc) })
		return pc.GetName()
	}
	low, high := priority("low", 10), priority("high", 1000)
	withPriority := func(class string) func(*rayv1.RayJob) {
		return func(j *rayv1.RayJob) { j.Labels["kueue.x-k8s.io/priority-class"] = class }
	}
	lowStep := startQueuedWith(t, ns, "low", `python -c "import time; print('low runs', flush=True); time.sleep(600)"`, withPriority(low))
	lowStep.ev.await(t, "admitted by Kueue LocalQueue gpu")
	lowStep.ev.await(t, "submitted")

	highStep := startQueuedWith(t, ns, "high", `python -c "print('high done')"`, withPriority(high))
	err := lowStep.wait(t)
	if !errors.Is(err, runner.ErrPreempted) || !strings.Contains(err.Error(), "Kueue LocalQueue gpu") {
		t.Errorf("the low-priority step ended with %v, want a preemption by Kueue LocalQueue gpu", err)
	}
	if err := highStep.wait(t); err != nil {
		t.Fatalf("the high-priority step: %v", err)
	}
	highStep.ev.await(t, "admitted by Kueue LocalQueue gpu")
	nothingLeft(t, ns)
}
