package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/test/raytest"
)

// TestRealRayDashboardDiesOnExistingCluster: on a cluster the step only
// borrows, a dashboard that dies mid-run is warned about, given up on after
// the outage budget (an infrastructure error naming it), and the teardown
// follows without waiting out StopTimeout on the dead dashboard.
func TestRealRayDashboardDiesOnExistingCluster(t *testing.T) {
	head := raytest.StartHead(t, rayhead.Options{NumCPUs: 1})
	rs := newRealStepOn(t, head, "sleep", raytest.RunID(t))
	progress := &lineWatch{}
	rs.runner.Events = runner.TextSink(progress)
	rs.runner.Connect = adapters.Connector{MaxOutage: 5 * time.Second}.Connect
	rs.runner.StopTimeout = 2 * time.Minute // the dead dashboard must not be waited on for this long
	killed := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer close(killed)
		for !strings.Contains(rs.stdout.String(), "sleeping") {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		// SIGTERM, as `ray stop` would: the head lives on without it.
		if pid := dashboardPid(head.Pid()); pid > 0 && syscall.Kill(pid, syscall.SIGTERM) == nil {
			killed <- time.Now()
		}
	}()
	_, err := runWithin(t, ctx, rs)
	cancel()
	at, ok := <-killed
	if !ok {
		t.Fatalf("the dashboard was not killed (none found in the head's process group %d, or the job never slept); Run: %v\nprogress:\n%s", head.Pid(), err, progress)
	}
	if !errors.Is(err, runner.ErrUnreachable) || !errors.Is(err, runner.ErrInfrastructure) {
		t.Fatalf("Run error %v, want ErrUnreachable, an infrastructure failure\nprogress:\n%s", err, progress)
	}
	if since := time.Since(at); since < 5*time.Second || since > time.Minute {
		t.Errorf("Run returned %s after the dashboard died, want the 5s budget and the 5s stop, not StopTimeout", since)
	}
	for _, want := range []string{
		"stopped answering (connection refused); still trying, ",
		"could not stop it, dashboard " + head.DashboardURL() + " not answering",
	} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not say %q:\n%s", want, progress)
		}
	}
	if keep := <-rs.backend.teardowns; keep {
		t.Error("torn down with keep, want delete")
	}
}

// dashboardPid returns the pid of the dashboard.py process in group pgid,
// or 0.
func dashboardPid(pgid int) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && strings.Contains(string(cmdline), "dashboard/dashboard.py") {
			return pid
		}
	}
	return 0
}
