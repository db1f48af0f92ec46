package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testSignal stands in for the CLI's signal cause.
type testSignal struct{ name string }

func (e *testSignal) Error() string { return "received " + e.name }

// harness wires fakes that, left alone, make a step succeed: every call
// is recorded and moves the fake clock by a known amount.
type harness struct {
	t       *testing.T
	clock   *fakeClock
	calls   *calls
	backend *fakeBackend
	cluster *fakeCluster
	jobs    *fakeJobs
	session *fakeSession
	stdout  bytes.Buffer
	runner  *Runner
	step    Step
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu         sync.Mutex
	requests   []JobRequest
	tailDone   bool
	stopCalled bool
	final      JobInfo  // what Get says once the log ended
	teardowns  []error  // ctx.Err() seen by each Teardown call
	lines      []string // the job's log
	packed     []packCall
}

const (
	testRunID = "3d1c7a2e-7f0e-4b1e-9c55-2f6f1d2b8a10"
	one       = time.Second
)

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: newFakeClock(), calls: &calls{}, session: &fakeSession{}}
	h.ctx, h.cancel = context.WithCancelCause(context.Background())
	t.Cleanup(func() { h.cancel(nil) })
	exit0 := 0
	h.final = JobInfo{
		JobID: "02000000", Status: StatusSucceeded, DriverExitCode: &exit0,
		Start: h.clock.Now(), End: h.clock.Now().Add(time.Hour),
	}
	h.cluster = &fakeCluster{
		name: "ml-ads/raystep-train",
		ready: func(ctx context.Context) error {
			h.calls.add("ready")
			h.clock.Advance(20 * one)
			return nil
		},
		dashboard: func(ctx context.Context) (Dashboard, error) {
			h.calls.add("dashboard")
			h.clock.Advance(one)
			return Dashboard{URL: "http://127.0.0.1:38265", PublicURL: "https://ray.example.com/train"}, nil
		},
		setJobID: func(ctx context.Context, id string) error {
			h.calls.add("set job id %s", id)
			return nil
		},
		teardown: func(ctx context.Context, keep bool) error {
			h.calls.add("teardown keep=%v", keep)
			h.mu.Lock()
			h.teardowns = append(h.teardowns, ctx.Err())
			h.mu.Unlock()
			h.clock.Advance(5 * one)
			return nil
		},
	}
	h.backend = &fakeBackend{name: "kuberay", provision: func(ctx context.Context, req Step) (Cluster, error) {
		h.calls.add("provision %s", req.ID)
		h.clock.Advance(10 * one)
		return h.cluster, nil
	}}
	h.jobs = h.successJobs()
	h.step = Step{
		Name: "ads-ranking-train", Kind: "train", Entrypoint: "python train.py",
		GPUType: "a100-80gb", GPUCount: 4, Shape: "head + 4x gpu",
		Dagster: Dagster{RunID: testRunID, AssetKeys: []string{"ads/model"}, Context: json.RawMessage(`{"run_id":"` + testRunID + `"}`)},
	}
	h.runner = &Runner{
		Backend: h.backend,
		Connect: func(ctx context.Context, d Dashboard) (Jobs, error) {
			h.calls.add("connect %s", d.URL)
			return h.jobs, nil
		},
		Session:         h.session,
		Stdout:          &h.stdout,
		Clock:           h.clock,
		EncodeBootstrap: func(v any) (string, error) { b, err := json.Marshal(v); return "enc:" + string(b), err },
		PollInterval:    100 * time.Millisecond,
		Pack:            h.pack,
	}
	return h
}

// pack is the Runner's Pack. It runs beside the provisioning, so it is
// not one of h.calls.
func (h *harness) pack(ctx context.Context, dir string, excludes []string) (Package, error) {
	p := &fakePackage{uri: "gcs://_ray_pkg_0123abcd.zip", size: 3}
	h.mu.Lock()
	h.packed = append(h.packed, packCall{dir: dir, excludes: excludes, pkg: p})
	h.mu.Unlock()
	return p, nil
}

// packCall is one call of Runner.Pack.
type packCall struct {
	dir      string
	excludes []string
	pkg      *fakePackage
}

// fakePackage is a Package that knows whether it was removed.
type fakePackage struct {
	uri     string
	size    int64
	removed atomic.Int32
}

func (p *fakePackage) URI() string   { return p.uri }
func (p *fakePackage) Bytes() int64  { return p.size }
func (p *fakePackage) Remove() error { p.removed.Add(1); return nil }

// unreleased returns the packages h.pack made that were not removed once.
func (h *harness) unreleased() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.packed {
		if n := c.pkg.removed.Load(); n != 1 {
			out = append(out, fmt.Sprintf("%s removed %d times", c.pkg.uri, n))
		}
	}
	return out
}

// successJobs is a Jobs API whose job logs h.lines and ends as h.final.
func (h *harness) successJobs() *fakeJobs {
	return &fakeJobs{
		upload: func(ctx context.Context, pkg Package) error {
			h.calls.add("upload %s", pkg.URI())
			h.clock.Advance(2 * one)
			return nil
		},
		submit: func(ctx context.Context, req JobRequest) (string, error) {
			h.calls.add("submit %s", req.SubmissionID)
			h.mu.Lock()
			h.requests = append(h.requests, req)
			h.mu.Unlock()
			h.clock.Advance(one)
			return req.SubmissionID, nil
		},
		tail: func(ctx context.Context, id string, onLine func(string)) error {
			h.calls.add("tail %s", id)
			for _, l := range h.lines {
				onLine(l)
			}
			h.clock.Advance(time.Hour)
			h.mu.Lock()
			h.tailDone = true
			h.mu.Unlock()
			return nil
		},
		get:  h.get,
		stop: h.stop,
	}
}

func (h *harness) get(ctx context.Context, id string) (JobInfo, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopCalled:
		return JobInfo{Status: StatusStopped}, nil
	case h.tailDone:
		return h.final, nil
	}
	return JobInfo{Status: StatusRunning}, nil
}

func (h *harness) stop(ctx context.Context, id string) (bool, error) {
	h.calls.add("stop %s", id)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopCalled = true
	return true, nil
}

// run runs the step and fails the test if Run does not return.
func (h *harness) run() (Result, error) {
	h.t.Helper()
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := h.runner.Run(h.ctx, h.step)
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(30 * time.Second):
		h.t.Fatal("Run did not return")
		return Result{}, errors.New("unreachable")
	}
}

// driverMessages returns what the session got, without raystep's own logs.
func (h *harness) driverMessages() []string {
	h.session.mu.Lock()
	defer h.session.mu.Unlock()
	var out []string
	for _, m := range h.session.sent {
		if m.Method == "log" && bytes.Contains(m.Params, []byte(`"raystep `)) {
			continue
		}
		out = append(out, string(m.Method)+" "+string(m.Params))
	}
	return out
}

// ownLogs returns raystep's own log messages.
func (h *harness) ownLogs() []string {
	h.session.mu.Lock()
	defer h.session.mu.Unlock()
	var out []string
	for _, m := range h.session.sent {
		var p struct{ Message, Level string }
		if m.Method == "log" && json.Unmarshal(m.Params, &p) == nil && bytes.Contains(m.Params, []byte(`"raystep `)) {
			out = append(out, p.Level+" "+p.Message)
		}
	}
	return out
}

// closedWith returns the exception of the session's only "closed".
func (h *harness) closedWith() *Exception {
	h.t.Helper()
	h.session.mu.Lock()
	defer h.session.mu.Unlock()
	if len(h.session.closed) != 1 {
		h.t.Fatalf("session closed %d times, want 1", len(h.session.closed))
	}
	return h.session.closed[0]
}
