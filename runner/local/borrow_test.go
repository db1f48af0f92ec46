package local

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
)

// TestLost: Lost says why a borrowed cluster is no longer there: its
// expiry passed, its record is gone (down), its supervisor is gone; and
// returns nil when the step ends first.
func TestLost(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		expires time.Time // zero: no record
		want    string
	}{
		{"expired", now.Add(-time.Second), "local cluster dev, which the step borrows, reached its expiry (2026-12-02T00:59:59Z) and stops"},
		{"down", time.Time{}, "local cluster dev, which the step borrows, was brought down"},
		{"supervisor gone", now.Add(time.Hour), "local cluster dev, which the step borrows, is gone: its head no longer runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Clusters{Dir: t.TempDir(), Now: func() time.Time { return now }}
			if !tt.expires.IsZero() {
				b, err := json.Marshal(Interactive{Name: "dev", Owner: "alice", Expires: tt.expires})
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(c.Dir, "dev.json"), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := c.Lost(t.Context(), "dev")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Lost = %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("expired, its keeper stopping it", func(t *testing.T) {
		t.Parallel()
		// A stand-in keeper: a process that names the head's temp dir, as
		// the real one does, so rayhead.Detached finds it running.
		// The shell waits on its sleep, so its own command line, with the
		// dir, stays; the cleanup kills both, as a process group.
		dir := t.TempDir()
		keeper := exec.Command("sh", "-c", "sleep 600 & wait", "keeper", dir)
		keeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := keeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-keeper.Process.Pid, syscall.SIGKILL); _ = keeper.Wait() })
		// Start returns before the child has exec'd sh: until then its
		// command line is this test's, and it is no keeper yet.
		for !(rayhead.Detached{Pid: keeper.Process.Pid, TempDir: dir}).Running() {
			select {
			case <-t.Context().Done():
				t.Fatal("the stand-in keeper never ran")
			case <-time.After(10 * time.Millisecond):
			}
		}
		c := &Clusters{Dir: t.TempDir(), Now: func() time.Time { return now }}
		b, err := json.Marshal(Interactive{Name: "dev", Owner: "alice", Expires: now.Add(-time.Second), SupervisorPid: keeper.Process.Pid, TempDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.Dir, "dev.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		err = c.Lost(t.Context(), "dev")
		if !errors.Is(err, runner.ErrClusterGone) || !strings.Contains(err.Error(), "reached its expiry") {
			t.Errorf("Lost = %v, want the expiry, the cluster gone with the job (its keeper stops it)", err)
		}
	})
	t.Run("step ends first", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := (&Clusters{Dir: t.TempDir()}).Lost(ctx, "dev"); err != nil {
			t.Errorf("Lost after the step ended = %v, want nil", err)
		}
	})
}

// TestBorrowNames: run --cluster with a name no cluster can have is the
// user's mistake (exit 2), said as such and not as a cluster up could
// start; a good name without a record is not found.
func TestBorrowNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &Site{Open: func() (*Clusters, error) { return &Clusters{Dir: dir}, nil }}
	_, _, err := s.Place(t.Context(), runner.Step{}, fleet.Placement{Cluster: "Alice_Dev"})
	if !errors.Is(err, fleet.ErrUsage) || !strings.Contains(err.Error(), `cluster name "Alice_Dev": want a DNS label`) ||
		strings.Contains(err.Error(), "starts it") {
		t.Errorf("run --cluster Alice_Dev: %v, want a usage error about the name alone", err)
	}
	_, _, err = s.Place(t.Context(), runner.Step{}, fleet.Placement{Cluster: "alice-dev"})
	if !errors.Is(err, fleet.ErrNotFound) || !strings.Contains(err.Error(), "raystep up --name alice-dev starts it") {
		t.Errorf("run --cluster alice-dev without a record: %v, want not found, pointing at raystep up", err)
	}
}
