package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

// The tests here reach the dashboard the way raystep does from a laptop or
// a CI runner: no dashboard URL, a client-go port-forward through the API
// server to the head pod, whose port 8265 kwok forwards to the shared Ray
// head (test/cluster).

// portForwardBackend is backend without a dashboard URL: raystep
// port-forwards, and gives up on a broken forward after giveUp. Its
// notices go to the test log and to n.
func portForwardBackend(t *testing.T, s *schemas.Spec, ns string, giveUp time.Duration, n *notices) *kuberay.Backend {
	t.Helper()
	b := backend(t, s, ns, nil, nil)
	b.Dashboard.URL = ""
	b.PortForwardGiveUp = giveUp
	b.Notify = func(level, msg string) {
		t.Logf("backend %s: %s", level, msg)
		n.add(msg)
	}
	return b
}

// notices records messages and tells waiters about each new one.
type notices struct {
	mu    sync.Mutex
	seen  []string
	added chan struct{} // closed and replaced on each add
}

func newNotices() *notices { return &notices{added: make(chan struct{})} }

func (n *notices) add(msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, msg)
	close(n.added)
	n.added = make(chan struct{})
}

// wait returns the first message from index from on that contains sub,
// and the index after it, failing the test when done closes or after a
// bound that only catches a hang.
func (n *notices) wait(t *testing.T, from int, sub string, done <-chan struct{}) (string, int) {
	t.Helper()
	bound := time.After(4 * time.Minute)
	for {
		n.mu.Lock()
		for i := from; i < len(n.seen); i++ {
			if msg := n.seen[i]; strings.Contains(msg, sub) {
				n.mu.Unlock()
				return msg, i + 1
			}
		}
		added := n.added
		n.mu.Unlock()
		select {
		case <-added:
		case <-done:
			t.Fatalf("the step ended before a message with %q", sub)
		case <-bound:
			t.Fatalf("no message with %q after 4m", sub)
		}
	}
}

// jobLines collects the job's log lines the runner writes to its Stdout.
type jobLines struct {
	t       *testing.T
	mu      sync.Mutex
	partial string
	lines   []string
	n       *notices // told each line
}

func (w *jobLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	parts := strings.Split(w.partial+string(p), "\n")
	w.partial = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		w.t.Log(l)
		w.lines = append(w.lines, l)
		w.n.add(l)
	}
	return len(p), nil
}

// numbered returns the numbers of the "numbered NNNN" lines seen, in order.
func (w *jobLines) numbered() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var got []int
	for _, l := range w.lines {
		var i int
		if _, err := fmt.Sscanf(l, "numbered %d", &i); err == nil {
			got = append(got, i)
		}
	}
	return got
}

// numberedDriver returns the entrypoint of testdata/numbered.py printing
// 2*half lines, and the files that let it go on and end.
func numberedDriver(t *testing.T, half int) (entrypoint, gate, end string) {
	t.Helper()
	script, err := filepath.Abs("testdata/numbered.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gate, end = filepath.Join(dir, "gate"), filepath.Join(dir, "end")
	return fmt.Sprintf("python %s %d %s %s", script, half, gate, end), gate, end
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// stepRun is a step running in the background.
type stepRun struct {
	done chan struct{}
	res  runner.Result
	err  error
}

func startStep(ctx context.Context, r *runner.Runner, st runner.Step) *stepRun {
	s := &stepRun{done: make(chan struct{})}
	go func() { s.res, s.err = r.Run(ctx, st); close(s.done) }()
	return s
}

func (s *stepRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(5 * time.Minute):
		t.Fatal("step still running after 5m")
	}
}

// TestPortForwardCutLosesNoLine runs a whole step with no dashboard URL:
// submission, log tail and stop go over raystep's port-forward. Halfway
// through the job's numbered lines every stream between the API server
// and the kubelet is cut (as a kubelet restart does): raystep opens the
// forward again on the same local port, its log follower reconnects, and
// every line arrives exactly once, in order, while the job still runs
// (through the tail, not a final fetch). Then the step is cancelled: the
// Ray job is stopped over the forward and nothing is left. It runs in
// parallel with the other tests that do not make the kubelet unreachable.
func TestPortForwardCutLosesNoLine(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-portforward-cut")
	t.Cleanup(func() { cleanNamespace(t, ns) })
	const half = 50
	entrypoint, gate, _ := numberedDriver(t, half)
	n := newNotices()
	b := portForwardBackend(t, spec(t, "spec.entrypoint="+entrypoint), ns, time.Minute, n)
	r := newRunner(t, b)
	lines := &jobLines{t: t, n: n}
	r.Stdout = lines
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	run := startStep(ctx, r, step(b.Spec, runID(t)))
	defer run.wait(t)

	_, next := n.wait(t, 0, fmt.Sprintf("numbered %04d", half), run.done)
	if cut := shared.k8s.CutKubeletStreams(); cut == 0 {
		t.Fatal("no stream to the kubelet to cut: the step does not port-forward")
	}
	msg, next := n.wait(t, next, "broke, opening it again", run.done)
	t.Logf("raystep noticed: %s", msg)
	msg, _ = n.wait(t, next, "open again", run.done)
	t.Logf("raystep: %s", msg)
	touch(t, gate)
	n.wait(t, next, fmt.Sprintf("numbered %04d", 2*half), run.done)
	cancel(errors.New("received terminated"))
	run.wait(t)

	if !errors.Is(run.err, runner.ErrCancelled) {
		t.Fatalf("step error = %v, want cancelled", run.err)
	}
	if run.res.Job.Status != runner.StatusStopped {
		t.Errorf("Ray job %s after cancel, want STOPPED", run.res.Job.Status)
	}
	var want []int
	for i := 1; i <= 2*half; i++ {
		want = append(want, i)
	}
	if got := lines.numbered(); !slices.Equal(got, want) {
		t.Errorf("numbered lines %v, want 1..%d each once in order", got, 2*half)
	}
	nothingLeft(t, ns)
}

// TestPortForwardGivesUpWhenHeadIsGone runs the built binary with no
// dashboard URL and a give-up of 3s; its job's log goes over the
// port-forward. While the job runs the head pod is deleted and its
// replacement cannot be scheduled (every node is cordoned; the step's
// Unschedulable grace is long), and the kubelet's streams end as they do
// with the pod: raystep tries to open the forward again, gives up with a
// clear error, tears down and exits 3. Not parallel: it cordons the
// shared nodes.
func TestPortForwardGivesUpWhenHeadIsGone(t *testing.T) {
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-portforward-giveup")
	t.Cleanup(func() { cleanNamespace(t, ns) })
	entrypoint, _, _ := numberedDriver(t, 1)
	s := newDagsterStep(t, bin, ns, "spec.entrypoint="+entrypoint)
	s.env = slices.DeleteFunc(s.env, func(kv string) bool { return strings.HasPrefix(kv, "RAYSTEP_DASHBOARD_URL=") })
	s.env = append(s.env, "RAYSTEP_PORT_FORWARD_GIVE_UP=3s", "RAYSTEP_UNSCHEDULABLE_GRACE=10m")
	p := s.start(t)
	waitJobRunning(t, s, p)
	cordonNodes(t)
	head := deleteHeadPod(t, ns)
	if cut := shared.k8s.CutKubeletStreams(); cut == 0 {
		t.Fatal("no stream to the kubelet to cut: the step does not port-forward")
	}
	gone := time.Now()
	code := p.wait(t, 3*time.Minute)
	took := time.Since(gone)
	out := p.out.String()
	if code != 3 {
		t.Fatalf("raystep exited %d, want 3\n%s", code, out)
	}
	for _, want := range []string{
		fmt.Sprintf("port-forward to the head of %s/%s: gave up after 3s", ns, s.id),
		fmt.Sprintf("RayJob %s/%s has no running head pod to port-forward to", ns, s.id),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	t.Logf("FIGURES head pod %s gone -> raystep exited 3 after %s (give-up 3s, then teardown)", head, took.Round(time.Millisecond))
	if jobs := stepJobs(t, s.runID); len(jobs) != 1 || !jobs[0].Status.Terminal() {
		t.Errorf("Ray jobs of the run: %+v, want one, stopped", jobs)
	}
	nothingLeft(t, ns)
}

// cordonNodes makes every node unschedulable until the test ends.
func cordonNodes(t *testing.T) {
	t.Helper()
	nodes, err := shared.k8s.Clientset.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(ctx context.Context, name string, unschedulable bool) error {
		patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
		_, err := shared.k8s.Clientset.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := set(ctx, n.Name, false); err != nil {
				t.Errorf("uncordon node %s: %v", n.Name, err)
			}
		})
		if err := set(t.Context(), n.Name, true); err != nil {
			t.Fatalf("cordon node %s: %v", n.Name, err)
		}
	}
}

// deleteHeadPod deletes the head pod of ns at once and returns its name
// once it is gone.
func deleteHeadPod(t *testing.T, ns string) string {
	t.Helper()
	pods := shared.k8s.Clientset.CoreV1().Pods(ns)
	list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: "ray.io/node-type=head"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("head pods of %s: %d, %v; want one", ns, len(list.Items), err)
	}
	head := list.Items[0]
	if err := pods.Delete(t.Context(), head.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatalf("delete head pod %s: %v", head.Name, err)
	}
	if _, err := pods.Get(t.Context(), head.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("head pod %s still there after deleting it at once (%v)", head.Name, err)
	}
	return head.Name
}
