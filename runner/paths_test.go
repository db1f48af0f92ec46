package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/dagster_integration/pipes"
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

// TestRunDashboardOutage: while Tail reports a dashboard that does not
// answer, the step warns at once and then every 30s with the time so far,
// says when the dashboard answers again, and relays every line once.
func TestRunDashboardOutage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var progress strings.Builder
	h.runner.Events = textSink(&progress)
	refused := fmt.Errorf("get job: dial tcp 127.0.0.1:38265: %w", syscall.ECONNREFUSED)
	h.jobs.follow = func(ctx context.Context, id string, onLine func(string), onOutage func(Outage)) error {
		h.calls.add("tail")
		onLine("line 1")
		onLine(pipesLog)
		for _, s := range []int{1, 5, 20, 31, 45, 62} {
			onOutage(Outage{For: time.Duration(s) * time.Second, Limit: 3 * time.Minute, Err: refused})
		}
		onOutage(Outage{For: 70 * time.Second, Limit: 3 * time.Minute})
		onLine("line 3")
		h.mu.Lock()
		h.tailDone = true
		h.mu.Unlock()
		return nil
	}
	res, err := h.run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff("line 1\nline 3\n", h.stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if msgs := h.driverMessages(); len(msgs) != 2 || !strings.HasPrefix(msgs[0], "log ") {
		t.Errorf("driver messages %v, want the log once then the materialization", msgs)
	}
	var got []string
	for _, l := range h.ownLogs() {
		if strings.Contains(l, "raystep run: dashboard") {
			got = append(got, l)
		}
	}
	const down = "WARNING raystep run: dashboard http://127.0.0.1:38265 stopped answering (connection refused); still trying, "
	want := []string{
		down + "1s so far, giving up after 3m0s",
		down + "31s so far, giving up after 3m0s",
		down + "1m2s so far, giving up after 3m0s",
		"INFO raystep run: dashboard http://127.0.0.1:38265 answers again after 1m10s; following the log of job " + res.ID,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dashboard logs (-want +got):\n%s", diff)
	}
	if !strings.Contains(progress.String(), "] run !      dashboard http://127.0.0.1:38265 stopped answering (connection refused); still trying, 1s so far") {
		t.Errorf("progress does not warn about the dashboard:\n%s", progress.String())
	}
}

// TestRunStopBoundedWhenDashboardDown: once the dashboard stopped
// answering, stopping the job gets downStopTimeout, not StopTimeout, and
// the cluster's teardown follows with a warning that the job may still run.
func TestRunStopBoundedWhenDashboardDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.jobs.follow = func(ctx context.Context, id string, onLine func(string), onOutage func(Outage)) error {
		h.calls.add("tail")
		onOutage(Outage{For: time.Second, Limit: time.Minute, Err: syscall.ECONNREFUSED})
		return fmt.Errorf("%w: did not answer for 1m0s", ErrUnreachable)
	}
	var stopWait time.Duration
	h.jobs.stop = func(ctx context.Context, id string) (bool, error) {
		h.calls.add("stop")
		start := h.clock.Now()
		h.clock.Advance(downStopTimeout)
		<-ctx.Done()
		stopWait = h.clock.Now().Sub(start)
		return false, fmt.Errorf("stop: %w", syscall.ECONNREFUSED)
	}
	res, err := h.run()
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrInfrastructure) {
		t.Fatalf("Run error %v, want ErrUnreachable and ErrInfrastructure", err)
	}
	want := []string{"provision", "ready", "dashboard", "connect", "submit", "set job id", "tail", "stop", "teardown keep=false"}
	if diff := cmp.Diff(want, callNames(h.calls.list())); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if stopWait != downStopTimeout {
		t.Errorf("stop gave up after %s, want %s", stopWait, downStopTimeout)
	}
	if logs := h.ownLogs(); !containsPrefix(logs, "WARNING raystep teardown: job "+res.ID+" may still run: could not stop it, dashboard http://127.0.0.1:38265 not answering") {
		t.Errorf("own logs %v, want a warning that the job may still run", logs)
	}
}

// TestRunPassesBadDriverMessagesThrough: a line that looks like a Pipes
// message but is not a valid one, or one Dagster's session refuses, is not
// lost: it reaches stdout as the text it was, with a warning. (raystep
// dropped such lines before.)
func TestRunPassesBadDriverMessagesThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	refused := `{"__dagster_pipes_version": "0.1", "method": "report_custom_message", "params": {"payload": "refused"}}`
	h.session.send = func(m *pipes.Message) error {
		if m.Method == "report_custom_message" {
			return fmt.Errorf("%w: report_custom_message: too large", ErrInvalidMessage)
		}
		return nil
	}
	bad := []string{
		`{"__dagster_pipes_version": "0.1", "method": 7, "params": {}}`,
		`{"__dagster_pipes_version": "0.1", "method": "log", "params": [1]}`,
		`{"__dagster_pipes_version": "0.1", "method": "report_custom_message", "params": {"payload": 1, "x": 2}}`,
		`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"metadata": {}}}`,
		`{"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": "epoch 2", "level": "LOUD"}}`,
		refused,
	}
	h.lines = append(append([]string{}, bad...), pipesLog)
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(strings.Join(bad, "\n")+"\n", h.stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	var warnings []string
	for _, l := range h.ownLogs() {
		if strings.HasPrefix(l, "WARNING raystep run: ") {
			warnings = append(warnings, l)
		}
	}
	want := []string{
		"WARNING raystep run: driver output: passed an invalid Pipes message through as text: invalid dagster pipes message: method must be a string",
		"WARNING raystep run: driver output: passed an invalid Pipes message through as text: invalid dagster pipes message: log: params must be an object or null",
		`WARNING raystep run: driver output: passed an invalid Pipes message through as text: invalid dagster pipes message: report_custom_message: unexpected param "x"`,
		`WARNING raystep run: driver output: passed an invalid Pipes message through as text: invalid dagster pipes message: report_asset_materialization: missing param "asset_key"`,
		`WARNING raystep run: driver output: passed an invalid Pipes message through as text: invalid dagster pipes message: log: level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got "LOUD"`,
		"WARNING raystep run: passed a report_custom_message message from the driver through as text: invalid dagster pipes message: report_custom_message: too large",
	}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
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
		`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "ads/other", "data_version": null, "metadata": {"bad": {"raw_value": 1, "type": "int"}}}}`,
	}
	h.session.send = func(m *pipes.Message) error {
		if m.Method == pipes.MethodReportMaterialize && strings.Contains(string(m.Params), `"bad"`) {
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
	h.session.send = func(m *pipes.Message) error {
		if m.Method == pipes.MethodReportMaterialize {
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
