package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// blockUntilDone waits for ctx like a well-behaved backend call.
func blockUntilDone(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestRunFailures(t *testing.T) {
	t.Parallel()
	exit1 := 1
	driverExc := &Exception{Name: "ValueError", Message: "boom", Stack: []string{"train.py:3"}}
	tests := []struct {
		name      string
		setup     func(h *harness)
		wantIs    []error
		wantPhase Phase  // for an InfraError
		wantMsg   string // a part of the error text
		wantCalls []string
		wantExc   string // the closed exception's name
	}{
		{
			name: "job failed",
			setup: func(h *harness) {
				h.lines = []string{"Traceback", `{"__dagster_pipes_version": "0.1", "method": "closed", "params": {"exception": {"name": "ValueError", "message": "boom", "stack": ["train.py:3"], "cause": null, "context": null}}}`}
				h.final = JobInfo{Status: StatusFailed, DriverExitCode: &exit1,
					Message: "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\nTraceback\nValueError: boom\n"}
			},
			wantIs:    []error{ErrJobFailed},
			wantMsg:   "FAILED: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars): ValueError: boom (driver exit code 1)",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id", "tail", "teardown keep=false"},
			wantExc:   "RayJobFailed",
		},
		{
			name:      "job stopped by someone else",
			setup:     func(h *harness) { h.final = JobInfo{Status: StatusStopped, Message: "stopped by user"} },
			wantIs:    []error{ErrJobStopped},
			wantMsg:   "STOPPED: stopped by user",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id", "tail", "teardown keep=false"},
			wantExc:   "RayJobStopped",
		},
		{
			name: "provisioning refused after creating something",
			setup: func(h *harness) {
				h.backend.provision = func(ctx context.Context, req Step) (Cluster, error) {
					h.calls.add("provision")
					return h.cluster, errors.New(`rayjobs.ray.io "x" is forbidden`)
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseProvision, wantMsg: "is forbidden",
			wantCalls: []string{"provision", "teardown keep=false"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "provisioning refused before creating anything",
			setup: func(h *harness) {
				h.backend.provision = func(ctx context.Context, req Step) (Cluster, error) {
					h.calls.add("provision")
					return nil, errors.New("no kubeconfig")
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseProvision, wantMsg: "no kubeconfig",
			wantCalls: []string{"provision"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "cluster never ready",
			setup: func(h *harness) {
				h.cluster.ready = func(ctx context.Context) error {
					h.calls.add("ready")
					return errors.New(`head pod: ImagePullBackOff: pull "ray:nope"`)
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseProvision, wantMsg: "ImagePullBackOff",
			wantCalls: []string{"provision", "ready", "teardown keep=false"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "dashboard unreachable",
			setup: func(h *harness) {
				h.runner.Connect = func(ctx context.Context, d Dashboard) (Jobs, error) {
					h.calls.add("connect")
					return nil, errors.New("connection refused")
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseDashboard, wantMsg: "connection refused",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "teardown keep=false"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "upload fails",
			setup: func(h *harness) {
				h.jobs.upload = func(ctx context.Context, pkg Package) error {
					h.calls.add("upload")
					return errors.New("connection reset by peer")
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseUpload, wantMsg: "upload working dir /src: connection reset by peer",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "teardown keep=false"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "submit fails: the job may exist, so it is stopped",
			setup: func(h *harness) {
				h.jobs.submit = func(ctx context.Context, req JobRequest) (string, error) {
					h.calls.add("submit")
					return "", errors.New("500 internal error")
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseSubmit, wantMsg: "500 internal error",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "stop", "teardown keep=false"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "cluster fails while the job runs",
			setup: func(h *harness) {
				h.cluster.failures = make(chan error, 1)
				h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
					h.calls.add("tail")
					h.cluster.failures <- errors.New("worker pod gpu-0: OOMKilled")
					return blockUntilDone(ctx)
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseRun, wantMsg: "cluster failed: worker pod gpu-0: OOMKilled",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id", "tail", "stop", "teardown keep=false"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "cluster gone with the job: no stop is sent to its dead dashboard",
			setup: func(h *harness) {
				h.cluster.failures = make(chan error, 1)
				h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
					h.calls.add("tail")
					h.cluster.failures <- Gone(errors.New("ray head exited"))
					return blockUntilDone(ctx)
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseRun, wantMsg: "cluster failed: ray head exited",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id", "tail", "teardown keep=false"},
			wantExc:   "InfrastructureError",
		},
		{
			name: "log stream breaks for good",
			setup: func(h *harness) {
				h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
					h.calls.add("tail")
					return errors.New("websocket: close 1006")
				}
			},
			wantIs: []error{ErrInfrastructure}, wantPhase: PhaseRun, wantMsg: "websocket: close 1006",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id",
				"tail", "stop", "teardown keep=false"},
			wantExc: "InfrastructureError",
		},
		{
			name: "dashboard stops answering for good",
			setup: func(h *harness) {
				h.jobs.follow = func(ctx context.Context, id string, onLine func(string), onOutage func(Outage)) error {
					h.calls.add("tail")
					onOutage(Outage{For: time.Second, Limit: 3 * time.Minute, Err: syscall.ECONNREFUSED})
					return fmt.Errorf("%w: did not answer for 3m0s: connection refused", ErrUnreachable)
				}
			},
			wantIs: []error{ErrInfrastructure, ErrUnreachable}, wantPhase: PhaseRun, wantMsg: "did not answer for 3m0s",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id",
				"tail", "stop", "teardown keep=false"},
			wantExc: "InfrastructureError",
		},
		{
			name: "provision deadline",
			setup: func(h *harness) {
				h.step.ProvisionTimeout = 15 * time.Minute
				h.cluster.ready = func(ctx context.Context) error {
					h.calls.add("ready")
					h.clock.Advance(16 * time.Minute)
					return blockUntilDone(ctx)
				}
			},
			wantIs: []error{ErrInfrastructure, ErrDeadline}, wantPhase: PhaseProvision, wantMsg: "timeouts.provision 15m0s",
			wantCalls: []string{"provision", "ready", "teardown keep=false"},
			wantExc:   "DeadlineExceeded",
		},
		{
			name: "run deadline",
			setup: func(h *harness) {
				h.step.RunTimeout = 24 * time.Hour
				h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
					h.calls.add("tail")
					h.clock.Advance(25 * time.Hour)
					return blockUntilDone(ctx)
				}
			},
			wantIs: []error{ErrInfrastructure, ErrDeadline}, wantPhase: PhaseRun, wantMsg: "timeouts.run 24h0m0s",
			wantCalls: []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id", "tail", "stop", "teardown keep=false"},
			wantExc:   "DeadlineExceeded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.step.WorkingDir = "/src"
			tt.setup(h)
			_, err := h.run()
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("Run error %v, want errors.Is %v", err, target)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Run error %q, want it to contain %q", err, tt.wantMsg)
			}
			var ie *InfraError
			if tt.wantPhase != "" && (!errors.As(err, &ie) || ie.Phase != tt.wantPhase) {
				t.Errorf("Run error %#v, want an InfraError in phase %s", err, tt.wantPhase)
			}
			if diff := cmp.Diff(tt.wantCalls, callNames(h.calls.list())); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			for i, terr := range h.teardowns {
				if terr != nil {
					t.Errorf("teardown %d ran on a done context: %v", i, terr)
				}
			}
			if logs := h.ownLogs(); !containsPrefix(logs, "ERROR raystep failed: "+err.Error()) {
				t.Errorf("own logs %v, want the error logged for Dagster's event log", logs)
			}
			exc := h.closedWith()
			if exc == nil || exc.Name != tt.wantExc || exc.Message != err.Error() {
				t.Errorf("closed with %+v, want %s: %v", exc, tt.wantExc, err)
			}
			if tt.name == "job failed" && !cmp.Equal(exc.Cause, driverExc) {
				t.Errorf("closed exception cause %+v, want the driver's %+v", exc.Cause, driverExc)
			}
		})
	}
}

// callNames drops the arguments of recorded calls except teardown's.
func callNames(calls []string) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		switch {
		case strings.HasPrefix(c, "teardown"):
			out = append(out, c)
		case strings.HasPrefix(c, "set job id"):
			out = append(out, "set job id")
		default:
			out = append(out, strings.Fields(c)[0])
		}
	}
	return out
}

func TestRunCancelled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		phase     Phase
		wantStop  bool
		wantCalls int // calls before teardown
	}{
		{PhaseProvision, false, 2},
		{PhaseDashboard, false, 3},
		{PhaseUpload, false, 5},
		{PhaseSubmit, true, 6},
		{PhaseRun, true, 8},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.step.WorkingDir = "/src"
			sig := &testSignal{name: "terminated"}
			interrupt := func(ctx context.Context, call string) error {
				h.calls.add("%s", call)
				h.cancel(sig)
				return blockUntilDone(ctx)
			}
			switch tt.phase {
			case PhaseProvision:
				h.cluster.ready = func(ctx context.Context) error { return interrupt(ctx, "ready") }
			case PhaseDashboard:
				h.cluster.dashboard = func(ctx context.Context) (Dashboard, error) { return Dashboard{}, interrupt(ctx, "dashboard") }
			case PhaseUpload:
				h.jobs.upload = func(ctx context.Context, pkg Package) error { return interrupt(ctx, "upload") }
			case PhaseSubmit:
				h.jobs.submit = func(ctx context.Context, req JobRequest) (string, error) { return "", interrupt(ctx, "submit") }
			case PhaseRun:
				h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error { return interrupt(ctx, "tail") }
			}
			_, err := h.run()
			var ce *CancelError
			var got *testSignal
			if !errors.Is(err, ErrCancelled) || !errors.As(err, &ce) || ce.Phase != tt.phase || !errors.As(err, &got) || got != sig {
				t.Fatalf("Run error %#v, want a CancelError in %s caused by the signal", err, tt.phase)
			}
			calls := callNames(h.calls.list())
			want := []string{"provision", "ready", "dashboard", "connect", "upload", "submit", "set job id", "tail"}[:tt.wantCalls]
			if tt.wantStop {
				want = append(want, "stop")
			}
			want = append(want, "teardown keep=false")
			if diff := cmp.Diff(want, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]error{nil}, h.teardowns, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("teardown context errors (-want +got):\n%s", diff)
			}
			if exc := h.closedWith(); exc == nil || exc.Name != "StepCancelled" {
				t.Errorf("closed with %+v, want StepCancelled", exc)
			}
		})
	}
}

func TestRunTeardownPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy   TeardownPolicy
		outcome  string // succeeded, failed or cancelled
		wantKeep bool
	}{
		{"", "succeeded", false},
		{TeardownAlways, "succeeded", false},
		{TeardownAlways, "failed", false},
		{TeardownAlways, "cancelled", false},
		{TeardownOnSuccess, "succeeded", false},
		{TeardownOnSuccess, "failed", true},
		{TeardownOnSuccess, "cancelled", false},
		{TeardownNever, "succeeded", true},
		{TeardownNever, "failed", true},
		{TeardownNever, "cancelled", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s", tt.policy, tt.outcome), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.step.Teardown = tt.policy
			switch tt.outcome {
			case "failed":
				h.final = JobInfo{Status: StatusFailed}
			case "cancelled":
				h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
					h.cancel(&testSignal{name: "interrupt"})
					return blockUntilDone(ctx)
				}
			}
			res, err := h.run()
			if (err != nil) != (tt.outcome != "succeeded") {
				t.Fatalf("Run error %v, want outcome %s", err, tt.outcome)
			}
			calls := h.calls.list()
			if diff := cmp.Diff(fmt.Sprintf("teardown keep=%v", tt.wantKeep), calls[len(calls)-1]); diff != "" {
				t.Errorf("last call (-want +got):\n%s", diff)
			}
			if res.Kept != tt.wantKeep {
				t.Errorf("Result.Kept = %v, want %v", res.Kept, tt.wantKeep)
			}
		})
	}
}
