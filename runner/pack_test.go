package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The working dir is packaged while the cluster starts: a cluster that is
// only ready once the package was built still lets the step succeed, and
// the package's file is gone before the job runs.
func TestPackWhileProvisioning(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step.WorkingDir, h.step.Excludes = "/src/ads", []string{"data/"}
	packed := make(chan struct{})
	h.runner.Pack = func(ctx context.Context, dir string, excludes []string) (Package, error) {
		defer close(packed)
		return h.pack(ctx, dir, excludes)
	}
	ready := h.cluster.ready
	h.cluster.ready = func(ctx context.Context) error {
		select {
		case <-packed: // a runner that packs only once the cluster is ready never gets here
		case <-ctx.Done():
			return ctx.Err()
		}
		return ready(ctx)
	}
	var leftDuringRun []string
	tail := h.jobs.tail
	h.jobs.tail = func(ctx context.Context, id string, onLine func(string)) error {
		leftDuringRun = h.unreleased()
		return tail(ctx, id, onLine)
	}

	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(h.packed) != 1 || h.packed[0].dir != "/src/ads" || !cmp.Equal(h.packed[0].excludes, []string{"data/"}) {
		t.Errorf("Pack calls %+v, want one of /src/ads without data/", h.packed)
	}
	if len(leftDuringRun) != 0 {
		t.Errorf("packages not released while the job ran: %v", leftDuringRun)
	}
	if got := h.requests[0].RuntimeEnv["working_dir"]; got != "gcs://_ray_pkg_0123abcd.zip" {
		t.Errorf("working_dir %v, want the package's URI", got)
	}
	if want := "INFO raystep upload: working dir /src/ads uploaded as gcs://_ray_pkg_0123abcd.zip (3 B)"; !slices.Contains(h.ownLogs(), want) {
		t.Errorf("Dagster was not told %q:\n%s", want, strings.Join(h.ownLogs(), "\n"))
	}
}

// A working dir that cannot be packaged fails the step while the cluster
// is still starting, rather than once it is up, and the cluster goes.
func TestPackFailsWhileProvisioning(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step.WorkingDir = "/src/ads"
	h.runner.Pack = func(ctx context.Context, dir string, excludes []string) (Package, error) {
		return nil, errors.New("open /src/ads/model.bin: permission denied")
	}
	h.cluster.ready = func(ctx context.Context) error {
		h.calls.add("ready")
		return blockUntilDone(ctx)
	}

	_, err := h.run()
	var ie *InfraError
	if !errors.Is(err, ErrInfrastructure) || !errors.As(err, &ie) || ie.Phase != PhaseUpload {
		t.Fatalf("Run error %#v, want an InfraError in the upload phase", err)
	}
	if want := "upload working dir /src/ads: open /src/ads/model.bin: permission denied"; !strings.Contains(err.Error(), want) {
		t.Errorf("Run error %q, want it to say %q", err, want)
	}
	if diff := cmp.Diff([]string{"provision", "ready", "teardown keep=false"}, callNames(h.calls.list())); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// A step that ends before its upload stops the packaging, waits for it,
// and leaves no package file behind: whether it ends while the package is
// being built, after it was built, or while the upload waits for it.
func TestPackEndsWithStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		done    bool // the package is built before the step ends
		setup   func(h *harness)
		wantErr error
		phase   Phase
	}{
		{
			name: "provision fails while packaging",
			setup: func(h *harness) {
				h.cluster.ready = func(ctx context.Context) error { return errors.New("head pod Unschedulable") }
			},
			wantErr: ErrInfrastructure, phase: PhaseProvision,
		},
		{
			name: "dashboard fails once packaged", done: true,
			setup: func(h *harness) {
				h.cluster.dashboard = func(ctx context.Context) (Dashboard, error) {
					return Dashboard{}, errors.New("port-forward: connection refused")
				}
			},
			wantErr: ErrInfrastructure, phase: PhaseDashboard,
		},
		{
			name: "signal while the upload waits for the package",
			setup: func(h *harness) {
				h.runner.Events = SinkFunc(func(e Event) {
					if e.Phase == PhaseDashboard && strings.HasPrefix(e.Message, "reached") {
						h.cancel(&testSignal{name: "interrupt"})
					}
				})
			},
			wantErr: ErrCancelled, phase: PhaseUpload,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.step.WorkingDir = "/src/ads"
			var returned atomic.Bool
			built := make(chan struct{})
			h.runner.Pack = func(ctx context.Context, dir string, excludes []string) (Package, error) {
				defer returned.Store(true)
				if tt.done {
					defer close(built)
					return h.pack(ctx, dir, excludes)
				}
				<-ctx.Done() // a real Pack releases what it began itself
				return nil, ctx.Err()
			}
			if tt.done {
				ready := h.cluster.ready
				h.cluster.ready = func(ctx context.Context) error {
					select {
					case <-built:
					case <-ctx.Done():
						return ctx.Err()
					}
					return ready(ctx)
				}
			}
			tt.setup(h)

			_, err := h.run()
			if !errors.Is(err, tt.wantErr) || phaseOf(err) != tt.phase {
				t.Fatalf("Run error %#v, want %v in phase %s", err, tt.wantErr, tt.phase)
			}
			if !returned.Load() {
				t.Error("Run returned while Pack still ran")
			}
			if left := h.unreleased(); len(left) != 0 {
				t.Errorf("packages not released: %v", left)
			}
			if strings.Contains(strings.Join(h.calls.list(), " "), "upload") {
				t.Errorf("calls %v: nothing was to be uploaded", h.calls.list())
			}
		})
	}
}

// A Runner without Pack refuses a step with a working dir before it
// creates anything.
func TestPackRequired(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step.WorkingDir = "/src/ads"
	h.runner.Pack = nil
	_, err := h.run()
	if err == nil || !strings.Contains(err.Error(), "working dir") {
		t.Fatalf("Run error %v, want one about the working dir", err)
	}
	if len(h.calls.list()) != 0 {
		t.Errorf("calls %v, want none", h.calls.list())
	}
}

// phaseOf returns the phase an InfraError or CancelError names.
func phaseOf(err error) Phase {
	var ie *InfraError
	var ce *CancelError
	switch {
	case errors.As(err, &ie):
		return ie.Phase
	case errors.As(err, &ce):
		return ce.Phase
	}
	return ""
}
