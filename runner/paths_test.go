package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRunAttachesToDuplicateSubmission(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.jobs.submit = func(ctx context.Context, req JobRequest) (string, error) {
		h.calls.add("submit")
		return "", fmt.Errorf("submit: %w: Please use a different submission_id", ErrAlreadySubmitted)
	}
	res, err := h.run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Attached {
		t.Error("Result.Attached = false, want true")
	}
	want := []string{"provision", "ready", "dashboard", "connect", "submit", "set job id", "tail", "teardown keep=false"}
	if diff := cmp.Diff(want, callNames(h.calls.list())); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	mat := decodeMaterialization(t, h.driverMessages()[0])
	if diff := cmp.Diff(map[string]any{"raw_value": true, "type": "bool"}, mat.Metadata["raystep/attached"]); diff != "" {
		t.Errorf("raystep/attached (-want +got):\n%s", diff)
	}
}

func TestRunTeardownBoundedWhenBackendHangs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.clock.auto = teardownGrace // give up on the hanging call at once
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	h.cluster.teardown = func(ctx context.Context, keep bool) error {
		h.calls.add("teardown keep=%v", keep)
		h.clock.Advance(DefaultTeardownTimeout)
		<-hang // ignores ctx
		return nil
	}
	_, err := h.run()
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Phase != PhaseTeardown || !strings.Contains(err.Error(), "teardown took longer than 5m0s") {
		t.Fatalf("Run error %v, want a teardown InfraError naming the bound", err)
	}
	if exc := h.closedWith(); exc == nil || exc.Name != "InfrastructureError" {
		t.Errorf("closed with %+v, want InfrastructureError", exc)
	}
}

func TestRunAbortStillTearsDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	abort := make(chan struct{})
	h.runner.Abort = abort
	sig := &testSignal{name: "terminated"}
	h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
		h.calls.add("tail")
		h.cancel(sig)
		return blockUntilDone(ctx)
	}
	h.jobs.stop = func(ctx context.Context, id string) (bool, error) {
		h.calls.add("stop")
		close(abort) // the second signal arrives while stopping
		return false, blockUntilDone(ctx)
	}
	var teardownErr error
	h.cluster.teardown = func(ctx context.Context, keep bool) error {
		h.calls.add("teardown keep=%v", keep)
		teardownErr = ctx.Err()
		return nil // issued the delete, did not wait
	}
	_, err := h.run()
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("Run error %v, want ErrCancelled", err)
	}
	want := []string{"provision", "ready", "dashboard", "connect", "submit", "set job id", "tail", "stop", "teardown keep=false"}
	if diff := cmp.Diff(want, callNames(h.calls.list())); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if teardownErr == nil {
		t.Error("teardown context not cancelled after abort")
	}
}

func TestRunReconnectsBrokenLogStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	attempt := 0
	h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
		h.calls.add("tail")
		attempt++
		lines := []string{"line 1", pipesLog, "line 3"}
		if attempt == 1 {
			lines = lines[:2]
		}
		for _, l := range lines {
			onLine(l)
		}
		if attempt == 1 {
			return errors.New("websocket: close 1006")
		}
		h.mu.Lock()
		h.tailDone = true
		h.mu.Unlock()
		return nil
	}
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff("line 1\nline 3\n", h.stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	msgs := h.driverMessages()
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "log ") {
		t.Errorf("driver messages %v, want the log once then the materialization", msgs)
	}
	if logs := h.ownLogs(); !containsPrefix(logs, "WARNING raystep run: log stream of job") {
		t.Errorf("own logs %v, want a warning about the broken stream", logs)
	}
}

func TestRunDropsBadDriverMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.session.send = func(m Message) error {
		if m.Method == "report_custom_message" {
			return fmt.Errorf("%w: report_custom_message: unexpected key", ErrInvalidMessage)
		}
		return nil
	}
	h.lines = []string{
		`{"__dagster_pipes_version": "0.1", "method": 7, "params": {}}`,
		`{"__dagster_pipes_version": "0.1", "method": "log", "params": [1]}`,
		`{"__dagster_pipes_version": "0.1", "method": "report_custom_message", "params": {"payload": 1, "x": 2}}`,
		`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"metadata": {}}}`,
		pipesLog,
	}
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if h.stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing: Pipes messages are never plain output", h.stdout.String())
	}
	var warnings int
	for _, l := range h.ownLogs() {
		if strings.HasPrefix(l, "WARNING raystep run: dropped") {
			warnings++
		}
	}
	if warnings != 4 {
		t.Errorf("got %d drop warnings, want 4: %v", warnings, h.ownLogs())
	}
	msgs := h.driverMessages()
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "log ") || !strings.HasPrefix(msgs[1], "report_asset_materialization ") {
		t.Errorf("driver messages %v, want the good log and raystep's materialization", msgs)
	}
}

func TestRunReportsOwnMaterializationPerAsset(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step.Dagster.AssetKeys = []string{"ads/model", "ads/features"}
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var keys []string
	for _, m := range h.driverMessages() {
		mat := decodeMaterialization(t, m)
		keys = append(keys, mat.AssetKey)
		if mat.DataVersion != nil || mat.Metadata["raystep/submission_id"] == nil {
			t.Errorf("materialization %s: want no data version and raystep's metadata", m)
		}
	}
	if diff := cmp.Diff([]string{"ads/model", "ads/features"}, keys); diff != "" {
		t.Errorf("materialized (-want +got):\n%s", diff)
	}
}

func TestRunMergesRepeatedAndRefusedMaterializations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.lines = []string{
		`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "ads/model", "data_version": null, "metadata": {"loss": {"raw_value": 0.7, "type": "float"}, "rows": {"raw_value": 10, "type": "int"}}}}`,
		`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "ads/model", "data_version": "v2", "metadata": {"loss": {"raw_value": 0.3, "type": "float"}}}}`,
		`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "ads/other", "data_version": null, "metadata": {"bad": 1}}}`,
	}
	h.session.send = func(m Message) error {
		if m.Method == methodMaterialization && strings.Contains(string(m.Params), `"bad"`) {
			return fmt.Errorf("%w: metadata value is not an object", ErrInvalidMessage)
		}
		return nil
	}
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	msgs := h.driverMessages()
	if len(msgs) != 2 {
		t.Fatalf("driver messages %v, want two materializations", msgs)
	}
	model, other := decodeMaterialization(t, msgs[0]), decodeMaterialization(t, msgs[1])
	if model.DataVersion == nil || *model.DataVersion != "v2" {
		t.Errorf("data version %v, want v2", model.DataVersion)
	}
	if diff := cmp.Diff(float2(0.3), model.Metadata["loss"]); diff != "" {
		t.Errorf("loss (-want +got):\n%s", diff)
	}
	if model.Metadata["rows"] == nil {
		t.Error("rows from the first report were lost")
	}
	if other.AssetKey != "ads/other" || other.Metadata["bad"] != nil || other.Metadata["raystep/backend"] == nil {
		t.Errorf("refused materialization resent as %+v, want raystep's metadata alone", other)
	}
}

func TestRunFailsWhenDagsterMissedMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.session.send = func(m Message) error {
		if m.Method == methodMaterialization {
			return errors.New("write pipes message: no space left on device")
		}
		return nil
	}
	_, err := h.run()
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Phase != PhaseReport || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Run error %v, want a report InfraError", err)
	}
}

func TestRunTearsDownOnPanic(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
		h.calls.add("tail")
		panic("bug")
	}
	defer func() {
		if p := recover(); p != "bug" {
			t.Errorf("recovered %v, want the panic to go on", p)
		}
		calls := callNames(h.calls.list())
		if diff := cmp.Diff([]string{"tail", "stop", "teardown keep=false"}, calls[len(calls)-3:]); diff != "" {
			t.Errorf("last calls (-want +got):\n%s", diff)
		}
	}()
	_, _ = h.runner.Run(h.ctx, h.step)
}

func TestRunStopFailureIsReported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stopErr error
		wantMsg string // empty: only the cancellation
	}{
		{"job never existed", fmt.Errorf("stop: %w", ErrNotFound), ""},
		{"dashboard gone", errors.New("connection refused"), "stop ray job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.jobs.submit = func(ctx context.Context, req JobRequest) (string, error) {
				h.cancel(&testSignal{name: "interrupt"})
				return "", blockUntilDone(ctx)
			}
			h.jobs.stop = func(ctx context.Context, id string) (bool, error) { return false, tt.stopErr }
			_, err := h.run()
			if !errors.Is(err, ErrCancelled) {
				t.Fatalf("Run error %v, want ErrCancelled", err)
			}
			gotInfra := errors.Is(err, ErrInfrastructure)
			if gotInfra != (tt.wantMsg != "") || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Run error %q, want infrastructure %v containing %q", err, tt.wantMsg != "", tt.wantMsg)
			}
			calls := h.calls.list()
			if calls[len(calls)-1] != "teardown keep=false" {
				t.Errorf("calls %v, want the cluster torn down after all", calls)
			}
		})
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func TestRunWaitsForStatusAfterLog(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	polls := 0
	h.jobs.get = func(ctx context.Context, id string) (JobInfo, error) {
		h.calls.add("get")
		if polls++; polls < 3 {
			return JobInfo{Status: StatusRunning}, nil
		}
		return h.final, nil
	}
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"provision", "ready", "dashboard", "connect", "submit", "set job id", "tail", "get", "get", "get", "teardown keep=false"}
	if diff := cmp.Diff(want, callNames(h.calls.list())); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestRunJobIgnoresStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
		h.cancel(&testSignal{name: "interrupt"})
		return blockUntilDone(ctx)
	}
	h.jobs.get = func(ctx context.Context, id string) (JobInfo, error) {
		h.clock.Advance(10 * one) // the StopTimeout (30s) passes after three polls
		return JobInfo{Status: StatusRunning}, nil
	}
	_, err := h.run()
	if !errors.Is(err, ErrCancelled) || errors.Is(err, ErrInfrastructure) {
		t.Fatalf("Run error %v, want only the cancellation", err)
	}
	if logs := h.ownLogs(); !containsPrefix(logs, "WARNING raystep teardown: job "+StepID(h.step.Name, testRunID, "ads/model", 0)+" still RUNNING") {
		t.Errorf("own logs %v, want a warning that the job is still running", logs)
	}
	calls := h.calls.list()
	if calls[len(calls)-1] != "teardown keep=false" {
		t.Errorf("calls %v, want the cluster torn down after all", calls)
	}
}

// TestRunStopsAJobWhoseSubmitWasLost covers a SIGTERM while the submit is
// in flight: Ray takes the job all the same, first does not know it yet,
// then knows it but has no supervisor to stop, then stops it.
func TestRunStopsAJobWhoseSubmitWasLost(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var mu sync.Mutex
	stops, stoppedAt := 0, 0
	h.jobs.submit = func(ctx context.Context, req JobRequest) (string, error) {
		h.cancel(&testSignal{name: "terminated"})
		return "", blockUntilDone(ctx)
	}
	h.jobs.stop = func(ctx context.Context, id string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		stops++
		switch {
		case stops <= 3:
			return false, fmt.Errorf("stop %s: %w", id, ErrNotFound)
		case stops == 4:
			return false, nil // registered, supervisor not started yet
		default:
			stoppedAt = stops
			return true, nil
		}
	}
	h.jobs.get = func(ctx context.Context, id string) (JobInfo, error) {
		mu.Lock()
		defer mu.Unlock()
		if stoppedAt > 0 {
			return JobInfo{Status: StatusStopped}, nil
		}
		return JobInfo{Status: StatusPending}, nil
	}
	res, err := h.run()
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("Run error %v, want ErrCancelled", err)
	}
	if res.Job.Status != StatusStopped || stoppedAt != 5 {
		t.Errorf("job %s after %d stop calls (stopped at call %d), want STOPPED at call 5", res.Job.Status, stops, stoppedAt)
	}
}
