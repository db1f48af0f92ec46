package e2e

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv is this process's environment without anything that would
// point raystep at another cluster or a Dagster session, plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "RAYSTEP_") || strings.HasPrefix(name, "DAGSTER_PIPES_") ||
			name == "RAY_ADDRESS" || name == "RAY_API_SERVER_ADDRESS" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// head is what the ray wrapper recorded about `ray start`.
type head struct {
	pgid    int
	tempDir string
}

// startedHeads reads the wrapper's log for every `ray start` invocation,
// in order. rayhead starts a head again (up to 3 times) when ray's own
// start fails in a way worth retrying, which a busy machine provokes.
func startedHeads(t *testing.T, invocations string) []head {
	t.Helper()
	b, err := os.ReadFile(invocations)
	if err != nil {
		t.Fatalf("ray was never run: %v", err)
	}
	var heads []head
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[1] != "start" {
			continue
		}
		var h head
		h.pgid, _ = strconv.Atoi(fields[0])
		for _, f := range fields {
			if dir, ok := strings.CutPrefix(f, "--temp-dir="); ok {
				h.tempDir = dir
			}
		}
		heads = append(heads, h)
	}
	if len(heads) == 0 {
		t.Fatalf("no `ray start` in %q", b)
	}
	return heads
}

// startedHead is the last `ray start`: the head that came up, when an
// earlier attempt failed.
func startedHead(t *testing.T, invocations string) head {
	t.Helper()
	heads := startedHeads(t, invocations)
	return heads[len(heads)-1]
}

// TestRunSIGTERM sends SIGTERM to a raystep binary while its job runs on a
// private head: the job is stopped, the head and everything it started are
// gone, its temp dir is removed and raystep exits 143.
func TestRunSIGTERM(t *testing.T) {
	bin := raystepBin
	rayBin, invocations := rayWrapper(t)
	cmd := exec.Command(bin, "run", "-f", train,
		"--set", `spec.entrypoint=python -c "import time; print('sleeping', flush=True); time.sleep(600)"`)
	state := t.TempDir()
	cmd.Env = childEnv("RAYSTEP_RAY_BIN="+rayBin, "XDG_STATE_HOME="+state)
	stderr, done := runUntilLine(t, cmd, invocations, "sleeping", nil)
	h := startedHead(t, invocations)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitExitCode(t, "raystep", done, stderr, exitSIGTERM, 2*time.Minute, "SIGTERM")
	if !strings.Contains(stderr.String(), "stopping job") {
		t.Errorf("stderr does not say the job was stopped:\n%s", stderr.String())
	}
	assertHeadGone(t, h)
	// With its head gone, the history still tells how the step ended and
	// what its driver printed.
	fs := finishedSteps(t, state)
	if len(fs) != 1 || fs[0].Reason != "cancelled (SIGTERM)" || fs[0].ExitCode != exitSIGTERM {
		t.Fatalf("ls --finished after SIGTERM: %+v, want one step cancelled (SIGTERM), exit %d", fs, exitSIGTERM)
	}
	if code, log, errOut := runRay(t, map[string]string{"XDG_STATE_HOME": state}, "logs", fs[0].Name); code != 0 || !strings.Contains(log, "sleeping\n") {
		t.Errorf("logs %s: exit %d, %q %s", fs[0].Name, code, log, errOut)
	}
}

// runUntilLine starts cmd, a raystep binary run on a private head whose
// `ray start` invocations go to invocations, and returns once its job
// printed line on stdout; done then receives cmd.Wait's result. At the end
// of the test the run is cleaned up (cleanupRun), then after runs if set.
// awaitExitCode waits for the process whose exit done reports (and keeps
// reporting) to exit with want, at most within after what happened to it.
func awaitExitCode(t *testing.T, name string, done chan error, stderr *syncBuffer, want int, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != want {
			t.Errorf("%s exited with %v, want exit status %d\n%s", name, err, want, stderr.String())
		}
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s of %s:\n%s", name, within, what, stderr.String())
	}
}

func runUntilLine(t *testing.T, cmd *exec.Cmd, invocations, line string, after func()) (*syncBuffer, chan error) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() {
		cleanupRun(t, cmd, done, invocations)
		if after != nil {
			after()
		}
	})
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == line {
				close(seen)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	select {
	case <-seen:
	case err := <-done:
		t.Fatalf("raystep exited before its job ran: %v\n%s", err, stderr.String())
	case <-time.After(10 * time.Minute): // a hang; the head may wait its turn to start
		t.Fatalf("the job did not start within 10 minutes:\n%s", stderr.String())
	}
	return stderr, done
}

// assertHeadGone checks that nothing of a private head is left: its
// process group, any process running from its temp dir, the temp dir.
func assertHeadGone(t *testing.T, h head) {
	t.Helper()
	if err := syscall.Kill(-h.pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the head's process group %d still exists (kill 0: %v)", h.pgid, err)
	}
	if left := processesMentioning(t, h.tempDir); len(left) > 0 {
		t.Errorf("processes %v of the head (temp dir %s) still run", left, h.tempDir)
	}
	if _, err := os.Stat(h.tempDir); !os.IsNotExist(err) {
		t.Errorf("the head's temp dir %s is left (stat: %v)", h.tempDir, err)
	}
}

// cleanupRun kills what a failed test left: raystep, then the head's
// process group and anything running from its temp dir.
func cleanupRun(t *testing.T, cmd *exec.Cmd, done chan error, invocations string) {
	select {
	case <-done:
	default:
		_ = cmd.Process.Kill()
		<-done
	}
	b, _ := os.ReadFile(invocations)
	if !strings.Contains(string(b), " start ") {
		return
	}
	h := startedHead(t, invocations)
	_ = syscall.Kill(-h.pgid, syscall.SIGKILL)
	for _, pid := range processesMentioning(t, h.tempDir) {
		if n, err := strconv.Atoi(pid); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(h.tempDir)
}
