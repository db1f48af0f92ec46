package runner_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/test/raytest"
	"github.com/raystep/raystep/test/syncbuf"
)

var ray raytest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	ray.Stop()
	os.Exit(code)
}

// driver is a Ray entrypoint that talks Pipes through the real dagster-pipes.
const driver = `import sys, time
from dagster_pipes import open_dagster_pipes

mode = sys.argv[1]
MALFORMED = '{"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": "epoch 3", "level": "VERBOSE"}}'
with open_dagster_pipes() as p:
    print("plain line from the driver", flush=True)
    p.log.info("hello from the driver")
    p.report_asset_materialization(metadata={"loss": 0.5, "rows": 10})
    if mode == "malformed":
        print(MALFORMED, flush=True)
    if mode == "fail":
        raise ValueError("boom")
    if mode == "sleep":
        print("sleeping", flush=True)
        time.sleep(300)
`

// realStep wires the runner to the shared head, a real Pipes session
// writing to a messages file, and a working dir holding the driver.
type realStep struct {
	runner   *runner.Runner
	step     runner.Step
	messages string // the Pipes messages file
	stdout   *lineWatch
	backend  *borrowed
}

func newRealStep(t *testing.T, mode, runID string) *realStep {
	t.Helper()
	return newRealStepOn(t, ray.Head(t), mode, runID)
}

// newRealStepOn is newRealStep on a head of the test's own.
func newRealStepOn(t *testing.T, head raytest.Head, mode, runID string) *realStep {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "driver.py"), []byte(driver), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := &realStep{messages: filepath.Join(t.TempDir(), "messages"), stdout: &lineWatch{},
		backend: &borrowed{head: head, teardowns: make(chan bool, 1)}}
	data := pipes.ContextData{AssetKeys: []string{"ads/model"}, RunID: runID, Extras: map[string]any{}}
	sess := openSession(t, data, rs.messages)
	raw, err := json.Marshal(sess.Context().Data())
	if err != nil {
		t.Fatal(err)
	}
	rs.runner = &runner.Runner{
		Backend: rs.backend, Connect: connectRay, Pack: packDir, Session: pipesSession{sess}, Stdout: rs.stdout,
		EncodeBootstrap: pipes.EncodeBootstrap, PollInterval: 200 * time.Millisecond,
	}
	rs.step = runner.Step{
		Name: "runner-it", Kind: "train", Entrypoint: "python driver.py " + mode, WorkingDir: dir,
		RuntimeEnv: map[string]any{"env_vars": map[string]any{"PYTHONUNBUFFERED": "1"}},
		Resources:  runner.Resources{CPUs: 0.1},
		Dagster:    runner.Dagster{RunID: runID, AssetKeys: data.AssetKeys, Context: raw},
	}
	return rs
}

// openSession opens a real Pipes session as Dagster's subprocess client
// would have bootstrapped it, with messages going to a file.
func openSession(t *testing.T, data pipes.ContextData, messages string) *pipes.Session {
	t.Helper()
	env := map[string]string{}
	for key, v := range map[string]any{"DAGSTER_PIPES_CONTEXT": map[string]any{"data": data}, "DAGSTER_PIPES_MESSAGES": map[string]any{"path": messages}} {
		enc, err := pipes.EncodeBootstrap(v)
		if err != nil {
			t.Fatal(err)
		}
		env[key] = enc
	}
	sess, err := pipes.Open(pipes.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatalf("open pipes session: %v", err)
	}
	return sess
}

// read returns the messages written to the Pipes file, by method.
func (rs *realStep) read(t *testing.T) map[string][]map[string]any {
	t.Helper()
	f, err := os.Open(rs.messages)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]map[string]any{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("message file line %q: %v", sc.Text(), err)
		}
		out[m.Method] = append(out[m.Method], m.Params)
	}
	return out
}

// lineWatch is a concurrency-safe stdout the test reads while the step
// writes it.
type lineWatch = syncbuf.Buffer

func runWithin(t *testing.T, ctx context.Context, rs *realStep) (runner.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := rs.runner.Run(ctx, rs.step)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run did not finish in time: %v", err)
	}
	return res, err
}

func TestRealRaySucceedsThenAttaches(t *testing.T) {
	runID := raytest.RunID(t)
	rs := newRealStep(t, "ok", runID)
	res, err := runWithin(t, context.Background(), rs)
	if err != nil {
		t.Fatalf("Run: %v\nstdout:\n%s", err, rs.stdout)
	}
	if res.Job.Status != runner.StatusSucceeded || res.Attached {
		t.Errorf("result %+v, want a fresh SUCCEEDED job", res)
	}
	if out := rs.stdout.String(); !strings.Contains(out, "plain line from the driver\n") || strings.Contains(out, "__dagster_pipes_version") {
		t.Errorf("stdout %q, want the plain line and no Pipes message", out)
	}
	msgs := rs.read(t)
	logs := msgs["log"]
	if len(logs) == 0 || !containsMessage(logs, "hello from the driver") {
		t.Errorf("logs %v, want the driver's", logs)
	}
	mats := msgs["report_asset_materialization"]
	if len(mats) != 1 {
		t.Fatalf("materializations %v, want one", mats)
	}
	meta := mats[0]["metadata"].(map[string]any)
	for key, want := range map[string]string{"loss": "__infer__", "rows": "__infer__", "raystep/submission_id": "text", "raystep/duration_run_s": "float"} {
		if v, ok := meta[key].(map[string]any); !ok || v["type"] != want {
			t.Errorf("metadata %s = %v, want type %s", key, meta[key], want)
		}
	}
	if keep := <-rs.backend.teardowns; keep {
		t.Error("torn down with keep, want delete")
	}

	again := newRealStep(t, "ok", runID)
	res2, err := runWithin(t, context.Background(), again)
	if err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if !res2.Attached || res2.ID != res.ID || res2.Job.JobID != res.Job.JobID {
		t.Errorf("second result %+v, want it attached to %s (%s)", res2, res.ID, res.Job.JobID)
	}
}

// malformedLine is what the driver prints in mode "malformed": a Pipes log
// message with a level Dagster does not know.
const malformedLine = `{"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": "epoch 3", "level": "VERBOSE"}}`

// TestRealRayKeepsMalformedLine: a driver line that looks like a Pipes
// message but is not a valid one is not lost: it reaches stdout as it was
// printed, and Dagster is warned that it was passed through as text.
func TestRealRayKeepsMalformedLine(t *testing.T) {
	rs := newRealStep(t, "malformed", raytest.RunID(t))
	if _, err := runWithin(t, context.Background(), rs); err != nil {
		t.Fatalf("Run: %v\nstdout:\n%s", err, rs.stdout)
	}
	if out := rs.stdout.String(); !strings.Contains(out, "\n"+malformedLine+"\n") {
		t.Errorf("stdout lacks the malformed line %s:\n%s", malformedLine, out)
	}
	const warning = `raystep run: driver output: passed an invalid Pipes message through as text: invalid dagster pipes message: log: level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got "VERBOSE"`
	var found bool
	for _, l := range rs.read(t)["log"] {
		found = found || l["message"] == warning && l["level"] == "WARNING"
	}
	if !found {
		t.Errorf("Dagster was not warned %q: %v", warning, rs.read(t)["log"])
	}
}

func TestRealRayJobFails(t *testing.T) {
	rs := newRealStep(t, "fail", raytest.RunID(t))
	_, err := runWithin(t, context.Background(), rs)
	var je *runner.JobError
	if !errors.Is(err, runner.ErrJobFailed) || !errors.As(err, &je) {
		t.Fatalf("Run error %v, want a failed job", err)
	}
	if je.DriverExitCode == nil || *je.DriverExitCode != 1 || je.Driver == nil || je.Driver.Name != "ValueError" {
		t.Errorf("job error %+v (driver %+v), want exit code 1 and the driver's ValueError", je, je.Driver)
	}
	closed := rs.read(t)["closed"]
	if len(closed) != 1 || closed[0]["exception"] == nil {
		t.Fatalf("closed %v, want one with an exception", closed)
	}
	exc := closed[0]["exception"].(map[string]any)
	cause, _ := exc["cause"].(map[string]any)
	if exc["name"] != "RayJobFailed" || cause == nil || cause["name"] != "ValueError" || !strings.Contains(cause["message"].(string), "boom") {
		t.Errorf("closed exception %v, want RayJobFailed caused by the driver's ValueError: boom", exc)
	}
}

func TestRealRayCancelStopsJob(t *testing.T) {
	rs := newRealStep(t, "sleep", raytest.RunID(t))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		for !strings.Contains(rs.stdout.String(), "sleeping") {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		cancel(errors.New("terminated"))
	}()
	res, err := runWithin(t, ctx, rs)
	if !errors.Is(err, runner.ErrCancelled) || errors.Is(err, runner.ErrInfrastructure) {
		t.Fatalf("Run error %v, want only the cancellation\nstdout:\n%s", err, rs.stdout)
	}
	jobs, err := connectRay(context.Background(), runner.Dashboard{URL: ray.Head(t).DashboardURL()})
	if err != nil {
		t.Fatal(err)
	}
	info, err := jobs.Get(context.Background(), res.ID)
	if err != nil || info.Status != runner.StatusStopped {
		t.Errorf("job %s after cancel: %+v, %v; want STOPPED", res.ID, info, err)
	}
}

func containsMessage(logs []map[string]any, text string) bool {
	for _, l := range logs {
		if l["message"] == text {
			return true
		}
	}
	return false
}
