package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunDashboardDies kills the dashboard of the private head a raystep
// binary runs its job on, mid-run: raystep warns that the dashboard stopped
// answering, gives up after RAYSTEP_DASHBOARD_OUTAGE with exit 3, and its
// teardown leaves no process of the head or of the job behind.
func TestRunDashboardDies(t *testing.T) {
	bin := raystepBin
	rayBin, invocations := rayWrapper(t)
	marker := fmt.Sprintf("outage-%d", time.Now().UnixNano())
	cmd := exec.Command(bin, "run", "-f", train, "--set",
		`spec.entrypoint=python -c "import time
for i in range(100000): print('tick', i, flush=True); time.sleep(0.5)" `+marker)
	cmd.Env = childEnv("RAYSTEP_RAY_BIN="+rayBin, "RAYSTEP_DASHBOARD_OUTAGE=10s")
	stderr, done := runUntilLine(t, cmd, invocations, "tick 1", func() { killAll(t, marker) })
	h := startedHead(t, invocations)
	dash := groupProcess(t, h.pgid, "dashboard/dashboard.py")
	// SIGTERM, as `ray stop` would: the head keeps running without it (Ray
	// treats any other exit of a head process as fatal to the whole head).
	if err := syscall.Kill(dash, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	awaitExitCode(t, "raystep", done, stderr, exitInfrastructure, 3*time.Minute, "the dashboard's death")
	since := time.Since(killed)
	t.Logf("raystep exited %s after the dashboard died; stderr:\n%s", since.Round(100*time.Millisecond), stderr.String())
	if since < 10*time.Second {
		t.Errorf("raystep gave up %s after the dashboard died, before RAYSTEP_DASHBOARD_OUTAGE=10s", since)
	}
	out := stderr.String()
	for _, want := range []string{
		"stopped answering (connection refused); still trying, ",
		"so far, giving up after 10s",
		"dashboard not answering for 10s (http://127.0.0.1:",
		"could not stop it, dashboard http://127.0.0.1:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr does not say %q:\n%s", want, out)
		}
	}
	assertHeadGone(t, h)
	// The private head's teardown must end the job with the head, also when
	// the dashboard cannot stop it.
	if left := awaitGone(t, marker, time.Minute); len(left) > 0 {
		t.Errorf("processes of the job still run after raystep exited:\n%s", describeLeft(left))
	}
}

// describeLeft lists pids with their command lines and parents.
func describeLeft(pids []string) string {
	var b strings.Builder
	for _, p := range pids {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p, "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", p, "stat"))
		fmt.Fprintf(&b, "%s: %s [stat %s]\n", p, strings.ReplaceAll(string(cmdline), "\x00", " "), strings.TrimSpace(string(stat)))
	}
	return b.String()
}

// groupProcess returns the pid of the process in group pgid whose command
// line contains s, failing the test when there is none.
func groupProcess(t *testing.T, pgid int, s string) int {
	t.Helper()
	for _, p := range processesMentioning(t, s) {
		pid, _ := strconv.Atoi(p)
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			return pid
		}
	}
	t.Fatalf("no process of group %d runs %s", pgid, s)
	return 0
}

// awaitGone waits, at most bound, until no process mentions s, and
// returns those still left.
func awaitGone(t *testing.T, s string, bound time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		left := processesMentioning(t, s)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		<-time.After(100 * time.Millisecond)
	}
}

// killAll SIGKILLs what a failed test left of the job.
func killAll(t *testing.T, s string) {
	for _, p := range processesMentioning(t, s) {
		if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
