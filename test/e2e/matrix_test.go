package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/test/matrix"
)

// The signal matrix runs the built raystep on the local backend and
// signals it at each phase of a step with each signal Dagster, Kubernetes,
// a person or a closed terminal may send. Every process started for the
// step carries a marker in its environment (Ray passes raystep's
// environment down to the head, its workers and the job's driver), so the
// test finds them all, wherever they moved, without guessing by name.

// matrixPhase is a moment to signal raystep at, and how to recognise it.
type matrixPhase struct {
	name string
	// reached reports whether the run is at the phase now.
	reached func(r *matrixRun) bool
	// teardown is whether raystep reports deleting the cluster after a
	// clean signal there (a head still starting is stopped by its start).
	teardown bool
}

var matrixPhases = []matrixPhase{
	{"provisioning", func(r *matrixRun) bool { return r.sessionExists() }, false},
	{"dashboard", func(r *matrixRun) bool { return strings.Contains(r.stderr.String(), "] dashboard  reached ") }, true},
	{"submitted", func(r *matrixRun) bool { return strings.Contains(r.stderr.String(), " submitted\n") }, true},
	{"running", func(r *matrixRun) bool { return r.entrypointPgid() != 0 }, true},
}

var matrixSignals = []struct {
	name string
	sig  syscall.Signal
	code int // raystep's exit code; 0 for SIGKILL, which it cannot see
}{
	{"SIGTERM", syscall.SIGTERM, exitSIGTERM},
	{"SIGINT", syscall.SIGINT, exitSIGINT},
	{"SIGHUP", syscall.SIGHUP, exitSIGHUP},
	{"SIGKILL", syscall.SIGKILL, 0},
}

// TestSignalMatrix signals raystep in each phase with each signal. Each
// cell starts a private head, because what it proves is that head's end:
// after SIGTERM, SIGINT and SIGHUP raystep exits 143, 130 and 129, and
// when it prints that the cluster was deleted, nothing started for the
// step runs any more; after SIGKILL everything is gone within 60 s with
// no further command run. The head's temp dir is removed either way.
//
// `make test` runs a covering sample of the 16 cells (every phase once,
// every signal once, drawn from the commit: see test/matrix), `make
// test-full` all of them. RAYSTEP_SIGNAL_MATRIX_REPEAT runs each chosen
// cell that many times (default 1; raise it to soak for rare races).
// Cells run in parallel up to -parallel.
func TestSignalMatrix(t *testing.T) {
	repeat := 1
	if s := os.Getenv("RAYSTEP_SIGNAL_MATRIX_REPEAT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RAYSTEP_SIGNAL_MATRIX_REPEAT=%q: want a positive number", s)
		}
		repeat = n
	}
	for _, cell := range matrix.Cells(t, len(matrixPhases), len(matrixSignals)) {
		ph, sg := matrixPhases[cell.Row], matrixSignals[cell.Col]
		for i := range repeat {
			t.Run(fmt.Sprintf("%s/%s/%d", ph.name, sg.name, i), func(t *testing.T) {
				t.Parallel()
				r := startMatrixRun(t, raystepBin)
				r.signalAt(ph, sg.sig)
				if sg.sig == syscall.SIGKILL {
					r.checkGoneAfterKill()
				} else {
					r.checkCleanExit(sg.code, ph.teardown)
				}
			})
		}
	}
}

// matrixRun is one raystep run of the matrix.
type matrixRun struct {
	t           *testing.T
	cmd         *exec.Cmd
	marker      string // NAME=VALUE in the environment of every process of the run
	invocations string
	stderr      *watchBuffer
	stdout      *watchBuffer
	done        chan struct{} // closed when raystep exited
	waitErr     error
	deletedLeft []int // processes of the run left when "deleted" was printed
	readEnds    []*os.File
}

// matrixEntrypoint prints its pid and process group, then sleeps.
const matrixEntrypoint = `spec.entrypoint=python -c "import os, time; ` +
	`print('entrypoint', os.getpid(), os.getpgid(0), flush=True); time.sleep(600)"`

func startMatrixRun(t *testing.T, bin string) *matrixRun {
	return startMatrixRunWith(t, bin, false)
}

// startMatrixRunWith starts a run; with pipes, raystep writes to real
// pipes that closeOutput closes, as a closed SSH session does.
func startMatrixRunWith(t *testing.T, bin string, pipes bool) *matrixRun {
	rayBin, invocations := rayWrapper(t)
	r := &matrixRun{t: t, invocations: invocations, stdout: newWatchBuffer(), stderr: newWatchBuffer(),
		marker: "RAYSTEP_MATRIX_CELL=" + filepath.Dir(invocations), // unique per cell
		done:   make(chan struct{})}
	r.cmd = exec.Command(bin, "run", "-f", train, "--set", matrixEntrypoint)
	r.cmd.Env = childEnv("RAYSTEP_RAY_BIN="+rayBin, r.marker)
	r.cmd.Stdout = r.stdout
	r.stderr.onLine = func(line string) {
		if strings.Contains(line, "] teardown   cluster ") && strings.HasSuffix(line, " deleted") {
			r.deletedLeft = r.processes()
		}
	}
	r.cmd.Stderr = r.stderr
	if pipes {
		r.cmd.Stdout, r.cmd.Stderr = r.pipe(r.stdout), r.pipe(r.stderr)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []io.Writer{r.cmd.Stdout, r.cmd.Stderr} {
		if f, ok := f.(*os.File); ok {
			_ = f.Close()
		}
	}
	go func() { r.waitErr = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(r.cleanup)
	return r
}

// pipe returns the write end of a pipe whose read end is copied to w
// until closeOutput.
func (r *matrixRun) pipe(w io.Writer) *os.File {
	pr, pw, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	r.readEnds = append(r.readEnds, pr)
	go func() { _, _ = io.Copy(w, pr) }()
	return pw
}

// closeOutput closes the read ends of raystep's stdout and stderr.
func (r *matrixRun) closeOutput() {
	for _, f := range r.readEnds {
		_ = f.Close()
	}
}

// signalAt waits until the run reaches ph and sends sig.
func (r *matrixRun) signalAt(ph matrixPhase, sig syscall.Signal) {
	r.waitPhase(ph)
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatal(err)
	}
}

// waitPhase waits until the run reaches ph.
func (r *matrixRun) waitPhase(ph matrixPhase) {
	t := r.t
	bound := time.After(10 * time.Minute)         // a hang; the head may wait its turn to start
	tick := time.NewTicker(50 * time.Millisecond) // the temp dir is not a stream
	defer tick.Stop()
	for !ph.reached(r) {
		select {
		case <-r.done:
			t.Fatalf("raystep exited (%v) before phase %s:\n%s", r.waitErr, ph.name, r.stderr.String())
		case <-bound:
			t.Fatalf("phase %s not reached within 10 minutes:\n%s", ph.name, r.stderr.String())
		case <-r.stderr.changed():
		case <-r.stdout.changed():
		case <-tick.C:
		}
	}
	if ph.name == "provisioning" && strings.Contains(r.stderr.String(), "] dashboard ") {
		t.Logf("phase provisioning already passed when seen: the signal came after the dashboard answered")
	}
	if ph.name == "running" {
		if pid := r.entrypointPid(); !containsInt(r.processes(), pid) {
			t.Fatalf("the entrypoint (pid %d) lacks the marker %s: the test cannot see the job's processes", pid, r.marker)
		}
	}
}

// checkCleanExit checks raystep's exit code, that it printed "deleted"
// only once nothing of the run was left, and that nothing is left now.
func (r *matrixRun) checkCleanExit(code int, teardown bool) {
	t := r.t
	signalled := time.Now()
	select {
	case <-r.done:
		t.Logf("raystep exited %.1fs after the signal", time.Since(signalled).Seconds())
	case <-time.After(3 * time.Minute):
		t.Fatalf("raystep did not exit within 3 minutes of the signal:\n%s", r.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(r.waitErr, &ee) || ee.ExitCode() != code {
		t.Errorf("raystep exited with %v, want exit status %d\n%s", r.waitErr, code, r.stderr.String())
	}
	deleted := strings.Contains(r.stderr.String(), "] teardown   cluster ")
	if teardown && !deleted {
		t.Errorf("raystep did not report the cluster deleted:\n%s", r.stderr.String())
	}
	if left := without(r.deletedLeft, r.cmd.Process.Pid); deleted && len(left) > 0 {
		t.Errorf("raystep reported the cluster deleted while processes %v of the run still ran", left)
	}
	if left := r.processes(); len(left) > 0 {
		t.Errorf("processes of the run still run after raystep exited: %s\n%s", describe(left), r.stderr.String())
	}
	r.checkJobAndTempDir()
}

// checkGoneAfterKill waits up to 60 s for every process of the run to end
// after raystep was SIGKILLed, and runs nothing meanwhile.
func (r *matrixRun) checkGoneAfterKill() {
	t := r.t
	<-r.done
	killed := time.Now()
	defer func() { t.Logf("every process of the run was gone %.1fs after SIGKILL", time.Since(killed).Seconds()) }()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond) // an exit elsewhere sends no event here
	defer tick.Stop()
	for left := r.processes(); len(left) > 0; left = r.processes() {
		select {
		case <-deadline:
			t.Fatalf("60 s after SIGKILL processes of the run still run: %s", describe(left))
		case <-tick.C:
		}
	}
	r.checkJobAndTempDir()
}

// checkJobAndTempDir checks that the entrypoint's process group, if it
// ran, and the head's temp dir are gone.
func (r *matrixRun) checkJobAndTempDir() {
	t := r.t
	if pgid := r.entrypointPgid(); pgid != 0 {
		if left := groupMembers(pgid); len(left) > 0 {
			t.Errorf("the entrypoint's process group %d still has %s", pgid, describe(left))
		}
	}
	if dir := r.tempDir(); dir == "" {
		t.Errorf("ray start was never run")
	} else if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the head's temp dir %s is left (stat: %v)", dir, err)
	}
}

// processes lists the running processes that carry the run's marker.
func (r *matrixRun) processes() []int {
	var pids []int
	needle := []byte("\x00" + r.marker + "\x00")
	for _, pid := range allPids() {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), needle) && running(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// tempDir is the head's temp dir from the wrapper's log; "" before ray start.
func (r *matrixRun) tempDir() string {
	b, _ := os.ReadFile(r.invocations)
	for _, f := range strings.Fields(string(b)) {
		if dir, ok := strings.CutPrefix(f, "--temp-dir="); ok {
			return dir
		}
	}
	return ""
}

// sessionExists reports whether ray start has created its session.
func (r *matrixRun) sessionExists() bool {
	dir := r.tempDir()
	if dir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "session_latest"))
	return err == nil
}

// entrypointLine returns the entrypoint's pid and process group; zeros
// before it printed them.
func (r *matrixRun) entrypointLine() (pid, pgid int) {
	for _, line := range strings.Split(r.stdout.String(), "\n") {
		if _, err := fmt.Sscanf(line, "entrypoint %d %d", &pid, &pgid); err == nil {
			return pid, pgid
		}
	}
	return 0, 0
}

func (r *matrixRun) entrypointPid() int  { pid, _ := r.entrypointLine(); return pid }
func (r *matrixRun) entrypointPgid() int { _, pgid := r.entrypointLine(); return pgid }

// cleanup kills whatever a failed cell left.
func (r *matrixRun) cleanup() {
	select {
	case <-r.done:
	default:
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	for _, pid := range r.processes() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if dir := r.tempDir(); dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// TestRunSIGHUPAfterTerminalClosed is a closed SSH session: raystep's
// stdout and stderr lead nowhere any more when SIGHUP arrives while the
// job runs. raystep still tears down and exits 129, and nothing is left.
func TestRunSIGHUPAfterTerminalClosed(t *testing.T) {
	r := startMatrixRunWith(t, raystepBin, true)
	r.waitPhase(matrixPhases[3])
	r.closeOutput()
	if err := r.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("raystep did not exit within 3 minutes of SIGHUP")
	}
	var ee *exec.ExitError
	if !errors.As(r.waitErr, &ee) || ee.ExitCode() != exitSIGHUP {
		t.Errorf("raystep exited with %v, want exit status %d", r.waitErr, exitSIGHUP)
	}
	if left := r.processes(); len(left) > 0 {
		t.Errorf("processes of the run still run after raystep exited: %s", describe(left))
	}
	r.checkJobAndTempDir()
}
