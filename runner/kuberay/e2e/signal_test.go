package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/history"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/test/s3test"
	"github.com/raystep/raystep/test/syncbuf"
)

// The tests here run the built raystep binary as Dagster's subprocess
// client does (Pipes bootstrap in the environment, a messages file) and
// signal it as an orchestrator or the kernel would: SIGTERM must leave
// nothing behind, and a SIGKILLed step restarted under the same run id
// must re-attach to its RayJob and Ray job instead of creating twins.

// assetKey is the Dagster asset the binary steps materialize.
const assetKey = "e2e/model"

// buildRaystep returns the raystep binary the package's tests run,
// compiling cmd/raystep on first use: once, not per test, since tests
// running in parallel would each link their own copy.
func buildRaystep(t *testing.T) string {
	t.Helper()
	built.once.Do(func() { built.bin, built.err = goBuildRaystep() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// built is the binary every test of the package runs, built on first use;
// TestMain removes its directory.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func goBuildRaystep() (string, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", errors.New("no go.mod above the package directory")
		}
		root = parent
	}
	if built.dir, err = os.MkdirTemp("", "raystep-e2e-bin-"); err != nil {
		return "", err
	}
	bin := filepath.Join(built.dir, "raystep")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/raystep")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/raystep: %v\n%s", err, out)
	}
	return bin, nil
}

// dagsterStep is one Dagster step (run id, retry 0, one asset) whose
// attempts run the raystep binary.
type dagsterStep struct {
	bin, ns, runID string
	id             string // the RayJob's name and the Ray submission id
	messages       string // the Pipes messages file, shared by the attempts
	args, env      []string
}

// newDagsterStep prepares the invocation of testdata/step.yaml in ns with
// the --set overrides set.
func newDagsterStep(t *testing.T, bin, ns string, set ...string) *dagsterStep {
	t.Helper()
	return newDagsterAttempt(t, bin, ns, runID(t), 0, set...)
}

// newDagsterAttempt is newDagsterStep for attempt retry of the step of
// the Dagster run run, as Dagster starts a retry: same run, next retry
// number, a new RayJob.
func newDagsterAttempt(t *testing.T, bin, ns, run string, retry int, set ...string) *dagsterStep {
	t.Helper()
	specFile, err := filepath.Abs("testdata/step.yaml")
	if err != nil {
		t.Fatal(err)
	}
	profile, err := filepath.Abs("../../../examples/platform.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := &dagsterStep{bin: bin, ns: ns, runID: run, messages: filepath.Join(t.TempDir(), "messages")}
	s.id = runner.StepID(spec(t, set...).Metadata.Name, s.runID, assetKey, retry)
	data := pipes.ContextData{RunID: s.runID, RetryNumber: retry, AssetKeys: []string{assetKey}, Extras: map[string]any{}}
	boot, err := pipes.BootstrapEnv(pipes.ContextDataParams(data), pipes.FileMessagesParams(s.messages))
	if err != nil {
		t.Fatal(err)
	}
	s.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "XDG_STATE_HOME=" + t.TempDir(),
		"KUBECONFIG=" + shared.k8s.KubeConfigPath, "RAYSTEP_BACKEND=kuberay", "RAYSTEP_PROFILE=" + profile,
		"RAYSTEP_DASHBOARD_URL=" + shared.head.DashboardURL()}
	for k, v := range boot {
		s.env = append(s.env, k+"="+v)
	}
	s.args = []string{"run", "-f", specFile, "--namespace", ns}
	for _, kv := range set {
		s.args = append(s.args, "--set", kv)
	}
	return s
}

// process is one running raystep.
type process struct {
	cmd  *exec.Cmd
	out  *syncBuffer // stdout and stderr
	done chan struct{}
	err  error // cmd.Wait's, once done is closed
}

// start starts an attempt of s; it is killed when the test ends.
func (s *dagsterStep) start(t *testing.T) *process {
	t.Helper()
	p := &process{cmd: exec.Command(s.bin, s.args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = s.env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// A process group of its own: a test may kill it with all it started.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("raystep pid %d output:\n%s", p.cmd.Process.Pid, p.out.String())
		}
	})
	return p
}

// wait returns the exit code (-1 when killed by a signal), failing the
// test if raystep is still running after bound.
func (p *process) wait(t *testing.T, bound time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(bound):
		// Ask the Go runtime where raystep is stuck: SIGQUIT prints every
		// goroutine's stack on stderr (p.out) and exits.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("raystep still running after %s; its goroutines, if it answered SIGQUIT, are in its output", bound)
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("wait for raystep: %v", p.err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// rayClient talks to the shared Ray head, where every step's job runs.
func rayClient(t *testing.T) *raysubmit.Client {
	t.Helper()
	c, err := raysubmit.New(raysubmit.Config{BaseURL: shared.head.DashboardURL(), UserAgent: "raystep-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitJobRunning returns once the step's Ray job is RUNNING on the head
// and recorded in its RayJob's spec.jobId, failing the test if p exits
// first or that takes longer than a generous bound.
func waitJobRunning(t *testing.T, s *dagsterStep, p *process) {
	t.Helper()
	ray := rayClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	state := "no Ray job yet"
	for {
		if info, err := ray.Get(ctx, s.id); err == nil {
			state = "Ray job " + string(info.Status)
			job := &rayv1.RayJob{}
			if err := shared.k8s.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.id}, job); err == nil {
				state += fmt.Sprintf(", RayJob %s jobId %q", job.Status.JobDeploymentStatus, job.Spec.JobId)
				if info.Status == raysubmit.StatusRunning && job.Spec.JobId == s.id {
					return
				}
			}
		}
		select {
		case <-p.done:
			t.Fatalf("raystep exited (%v) before its job ran (%s)", p.err, state)
		case <-ctx.Done():
			t.Fatalf("job %s not running and recorded after 4m: %s", s.id, state)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stepJobs returns the Ray jobs the head holds for the Dagster run.
func stepJobs(t *testing.T, runID string) []raysubmit.JobDetails {
	t.Helper()
	all, err := rayClient(t).List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(j raysubmit.JobDetails) bool { return j.Metadata["raystep.dev/dagster-run"] != runID })
}

// rayJobWatch records the UID of every RayJob created in a namespace and
// the deployment statuses they reach.
type rayJobWatch struct {
	mu      sync.Mutex
	uids    []string
	reached map[rayv1.JobDeploymentStatus]chan struct{} // closed once seen
	closed  bool                                        // the watch ended before the test stopped it
}

// watchRayJobs starts watching the RayJobs of ns, before anything of the
// test is created there, so that no creation and no status is missed.
func watchRayJobs(t *testing.T, ns string) *rayJobWatch {
	t.Helper()
	c, err := kuberay.NewClients(shared.k8s.Config, kuberay.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Ray.RayV1().RayJobs(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rw := &rayJobWatch{reached: map[rayv1.JobDeploymentStatus]chan struct{}{}}
	stopped, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stopped); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if job, ok := ev.Object.(*rayv1.RayJob); ok {
				rw.record(ev.Type, job)
			}
		}
		select {
		case <-stopped:
		default:
			rw.mu.Lock()
			rw.closed = true
			rw.mu.Unlock()
		}
	}()
	return rw
}

func (w *rayJobWatch) record(ev watch.EventType, job *rayv1.RayJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev == watch.Added {
		w.uids = append(w.uids, string(job.UID))
	}
	ch := w.channel(job.Status.JobDeploymentStatus)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// channel returns the channel of status; w.mu is held.
func (w *rayJobWatch) channel(status rayv1.JobDeploymentStatus) chan struct{} {
	if w.reached[status] == nil {
		w.reached[status] = make(chan struct{})
	}
	return w.reached[status]
}

// reachedStatus is closed once a RayJob of the namespace reached status.
func (w *rayJobWatch) reachedStatus(status rayv1.JobDeploymentStatus) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.channel(status)
}

// created returns the UIDs seen so far, failing the test if the watch
// ended early (it might have missed one).
func (w *rayJobWatch) created(t *testing.T) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		t.Errorf("the RayJob watch ended early: cannot tell how many RayJobs were created")
	}
	return slices.Clone(w.uids)
}

// attached reads the last materialization in the Pipes messages file and
// returns its raystep/attached value.
func attached(t *testing.T, path string) any {
	t.Helper()
	return materialized(t, path, "raystep/attached")
}

// materialized returns the raw value of metadata key in the last
// materialization of the Pipes messages file.
func materialized(t *testing.T, path, key string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("messages file: %v", err)
	}
	var value any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Metadata map[string]struct {
					RawValue any `json:"raw_value"`
				} `json:"metadata"`
			} `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("messages file line %q: %v", sc.Text(), err)
		}
		if m.Method == string(pipes.MethodReportMaterialize) {
			value = m.Params.Metadata[key].RawValue
		}
	}
	return value
}

// TestBinarySIGKILLThenRestartReattaches: raystep is SIGKILLed while its
// job runs (it cannot clean up); the RayJob stays. Dagster's restart of
// the step with the same bootstrap re-attaches: it follows the same Ray
// job to SUCCEEDED, exits 0 and removes everything. One RayJob was ever
// created and the head ran one job for the run.
func TestBinarySIGKILLThenRestartReattaches(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-bin-sigkill")
	rayJobs := watchRayJobs(t, ns)
	s := newDagsterStep(t, bin, ns, `spec.entrypoint=python -c "import time; print('attempt output', flush=True); time.sleep(12)"`)
	first := s.start(t)
	waitJobRunning(t, s, first)
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t, time.Minute); code != -1 {
		t.Fatalf("SIGKILLed raystep exited %d, want killed", code)
	}
	created := rayJobUID(t, ns, s.id)
	if created == "" {
		t.Fatalf("the killed raystep left no RayJob %s to re-attach to; left: %q", s.id, leftovers(t.Context(), ns))
	}

	second := s.start(t)
	if code := second.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("restarted raystep exited %d, want 0\n%s", code, second.out.String())
	}
	if uids := rayJobs.created(t); !slices.Equal(uids, []string{created}) {
		t.Errorf("RayJobs created %v, want only the killed attempt's %s", uids, created)
	}
	jobs := stepJobs(t, s.runID)
	if len(jobs) != 1 || jobs[0].SubmissionID != s.id || jobs[0].Status != raysubmit.StatusSucceeded {
		t.Errorf("Ray jobs of the run: %+v, want one, %s, SUCCEEDED", jobs, s.id)
	}
	if got := attached(t, s.messages); got != true {
		t.Errorf("materialization raystep/attached = %v, want true", got)
	}
	if !strings.Contains(second.out.String(), "attempt output") {
		t.Errorf("the restart did not relay the job's log:\n%s", second.out.String())
	}
	nothingLeft(t, ns)
	// The history holds the step once, as the attempt that ended it: succeeded.
	r := onlyRecord(t, s)
	if r.Reason != "succeeded" || r.ExitCode != 0 || r.Status != "SUCCEEDED" || r.Backend != "kuberay" {
		t.Errorf("the step's record: %+v, want succeeded on kuberay", r)
	}
	if log := s.raystep(t, "logs", s.id); !strings.Contains(log, "attempt output\n") {
		t.Errorf("logs %s: %q, want the driver's line", s.id, log)
	}
}

// onlyRecord is the one record ls --finished lists in s's state dir.
func onlyRecord(t *testing.T, s *dagsterStep) history.Record {
	t.Helper()
	var recs []history.Record
	out := s.raystep(t, "ls", "--finished", "-o", "json")
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 1 || recs[0].Name != s.id {
		t.Fatalf("ls --finished: %v, want the record of %s\n%s", err, s.id, out)
	}
	return recs[0]
}

// TestBinaryFailedJobKeepsHistory: a KubeRay step whose job fails exits
// 1 and leaves nothing in the API server; its history says failed, with
// Ray's status and message, and keeps the driver's log.
func TestBinaryFailedJobKeepsHistory(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-bin-failed")
	s := newDagsterStep(t, bin, ns, `spec.entrypoint=python -c "import sys; print('about to fail', flush=True); sys.exit(5)"`)
	p := s.start(t)
	if code := p.wait(t, 5*time.Minute); code != 1 {
		t.Fatalf("raystep exited %d, want 1 (the job failed)\n%s", code, p.out.String())
	}
	nothingLeft(t, ns)
	r := onlyRecord(t, s)
	if r.Reason != "failed" || r.ExitCode != 1 || r.Status != "FAILED" || !strings.Contains(r.Message, "exit code 5") || r.Namespace != ns {
		t.Errorf("the step's record: %+v, want failed, job FAILED with its exit code, in %s", r, ns)
	}
	if log := s.raystep(t, "logs", s.id); !strings.Contains(log, "about to fail\n") {
		t.Errorf("logs %s: %q, want the driver's line", s.id, log)
	}
}

// TestBinarySIGTERMWhileRunning: SIGTERM while the job runs stops the Ray
// job, deletes the RayJob, its RayCluster and pods, and exits 143.
//
// Its profile names an S3 store for the history (moto's server, a process
// of its own): once raystep exited, another raystep with no local state,
// as a later Dagster pod or a laptop would be, lists the step as
// cancelled by SIGTERM and prints its driver log.
func TestBinarySIGTERMWhileRunning(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-bin-sigterm")
	s := newDagsterStep(t, bin, ns, `spec.entrypoint=python -c "import time; print('sleeping', flush=True); time.sleep(120)"`)
	store := s3test.Start(t)
	store.CreateBucket(t, "raystep-history")
	profile := s3test.Profile(t, "../../../examples/platform.yaml", `url: "`+store.URL("raystep-history", ns)+`"`)
	s.env = append(append(s.env, "RAYSTEP_PROFILE="+profile), s3test.Env()...) // the last of a name wins
	p := s.start(t)
	waitJobRunning(t, s, p)
	// The driver's line relayed (the buffer wakes nobody: looked at every
	// 100 ms), so the history has a log to keep.
	for !strings.Contains(p.out.String(), "sleeping\n") {
		select {
		case <-p.done:
			t.Fatalf("raystep exited (%v) before it relayed the driver's line:\n%s", p.err, p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	terminate(t, p)
	if jobs := stepJobs(t, s.runID); len(jobs) != 1 || jobs[0].Status != raysubmit.StatusStopped {
		t.Errorf("Ray jobs of the run after SIGTERM: %+v, want one, STOPPED", jobs)
	}
	nothingLeft(t, ns)

	elsewhere := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_STATE_HOME=" + t.TempDir(),
		"RAYSTEP_PROFILE=" + profile, "KUBECONFIG="}, s3test.Env()...)
	out := mustRaystep(t, elsewhere, "ls", "--finished", "-o", "json").stdout
	var recs []history.Record
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 1 {
		t.Fatalf("ls --finished elsewhere: %v\n%s", err, out)
	}
	if r := recs[0]; r.Name != s.id || r.Backend != "kuberay" || r.Namespace != ns || r.Reason != "cancelled (SIGTERM)" ||
		r.ExitCode != 143 || r.Phases["teardown"] <= 0 || r.DagsterRun != s.runID {
		t.Errorf("the store's record: %+v", r)
	}
	if log := mustRaystep(t, elsewhere, "logs", s.id).stdout; !strings.Contains(log, "sleeping\n") {
		t.Errorf("logs %s elsewhere: %q, want the driver's line", s.id, log)
	}
}

// TestBinarySIGTERMWhileProvisioning: SIGTERM while the RayJob is
// Initializing (pods coming up) or Waiting (cluster ready, the job about
// to be submitted) deletes the RayJob, its RayCluster and pods and exits
// 143.
func TestBinarySIGTERMWhileProvisioning(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	for _, at := range []rayv1.JobDeploymentStatus{rayv1.JobDeploymentStatusInitializing, rayv1.JobDeploymentStatusWaiting} {
		t.Run(string(at), func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, "e2e-bin-sigterm-"+strings.ToLower(string(at)))
			s := newDagsterStep(t, bin, ns, `spec.entrypoint=python -c "import time; time.sleep(120)"`)
			rayJobs := watchRayJobs(t, ns)
			p := s.start(t)
			select {
			case <-rayJobs.reachedStatus(at):
			case <-p.done:
				t.Fatalf("raystep exited (%v) before the RayJob was %s", p.err, at)
			case <-time.After(4 * time.Minute):
				t.Fatalf("RayJob not %s after 4m; left: %q", at, leftovers(t.Context(), ns))
			}
			terminate(t, p)
			nothingLeft(t, ns)
			// The RayJob's head would take a job submitted meanwhile with it;
			// this head is shared, so only say what the signal met.
			t.Logf("Ray jobs of the run after SIGTERM: %+v", stepJobs(t, s.runID))
		})
	}
}

// terminate sends p SIGTERM and checks that it exits 143 within a
// generous bound.
func terminate(t *testing.T, p *process) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 3*time.Minute); code != 143 {
		t.Fatalf("raystep exited %d after SIGTERM, want 143\n%s", code, p.out.String())
	}
}

// syncBuffer is safe for a writer and a reader at once.
type syncBuffer = syncbuf.Buffer
