package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raystep/raystep/fleet"
)

// The local backend's interactive clusters, end to end: the built raystep
// binary brings up a detached private head of the tests' Ray, a step
// borrows it, ls lists it, down stops it, and its supervisor stops it at
// its expiry with no raystep running. Each test has a state dir of its
// own (XDG_STATE_HOME) and stops whatever it started, also on failure.

// localEnv is a test's environment for the built binary: its own state
// dir and HOME, the ray wrapper, USER tester.
type localEnv struct {
	bin, rayBin, invocations, state, home string
}

func newLocalEnv(t *testing.T) localEnv {
	t.Helper()
	rayBin, invocations := rayWrapper(t)
	return localEnv{bin: raystepBin, rayBin: rayBin, invocations: invocations, state: t.TempDir(), home: t.TempDir()}
}

// env is the binary's environment: no kubeconfig, so that ls and gc look
// at the local clusters only.
func (e localEnv) env() []string {
	return childEnv("RAYSTEP_RAY_BIN="+e.rayBin, "XDG_STATE_HOME="+e.state, "USER=tester", "RAYSTEP_BACKEND=local",
		"HOME="+e.home, "KUBECONFIG=")
}

// record is the state dir's record of name; ok is false when there is none.
func (e localEnv) record(t *testing.T, name string) (rec localRecord, ok bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.state, "raystep", "clusters", name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return localRecord{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("record of %s: %v\n%s", name, err, b)
	}
	return rec, true
}

// localRecord is the part of a cluster's record the tests read.
type localRecord struct {
	Owner         string    `json:"owner"`
	Expires       time.Time `json:"expires"`
	DashboardURL  string    `json:"dashboardURL"`
	SupervisorPid int       `json:"supervisorPid"`
	TempDir       string    `json:"tempDir"`
	TokenFile     string    `json:"tokenFile"`
}

// raystep runs the built binary to its end, at most 5 minutes (also from
// a cleanup, when t.Context is done already).
func (e localEnv) raystep(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return e.raystepWith(t, nil, args...)
}

// raystepWith is raystep with the variables more added to the
// environment (a Pipes bootstrap).
func (e localEnv) raystepWith(t *testing.T, more map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// Only catches a hang: a command that starts a head may wait its turn
	// behind other heads' starts first.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env, cmd.Dir = e.env(), t.TempDir()
	for k, v := range more {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("raystep %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// up brings up name with args and stops it at the end of the test,
// whatever happened; it returns the cluster's record.
func (e localEnv) up(t *testing.T, name string, args ...string) localRecord {
	t.Helper()
	t.Cleanup(func() { e.cleanup(t, name) })
	code, out, errOut := e.raystep(t, append([]string{"up", "--name", name}, args...)...)
	if code != 0 {
		t.Fatalf("up exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"Local cluster " + name + " is ready", "raystep run --cluster " + name + " -f step.yaml",
		"export RAY_ADDRESS=127.0.0.1:", "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="} {
		if !strings.Contains(out, want) {
			t.Errorf("up's stdout does not say %q:\n%s", want, out)
		}
	}
	rec, ok := e.record(t, name)
	if !ok {
		t.Fatalf("up left no record of %s", name)
	}
	return rec
}

// cleanup stops what a test left of name: down, then SIGKILL for the
// supervisor's session and anything running from the head's temp dir.
func (e localEnv) cleanup(t *testing.T, name string) {
	rec, ok := e.record(t, name)
	if !ok {
		return
	}
	if code, _, errOut := e.raystep(t, "down", name); code != 0 {
		t.Errorf("clean up: down %s exited %d: %s", name, code, errOut)
	}
	killHead(t, e.head(t, rec.SupervisorPid))
}

// localHead is a detached head as the tests find it: its supervisor (the
// keeper, leader of a session and process group of its own), the process
// group of its `ray start` (the wrapper's pid; 0 when unknown) and its
// temp dir.
type localHead struct {
	keeper, pgid int
	tempDir      string
}

// head returns the head of the test's one `ray start`, supervised by keeper.
func (e localEnv) head(t *testing.T, keeper int) localHead {
	t.Helper()
	hd := startedHead(t, e.invocations)
	return localHead{keeper: keeper, pgid: hd.pgid, tempDir: hd.tempDir}
}

func killHead(t *testing.T, h localHead) {
	for _, g := range []int{h.keeper, h.pgid} {
		if g > 0 {
			_ = syscall.Kill(-g, syscall.SIGKILL)
		}
	}
	if h.tempDir == "" {
		return
	}
	for _, pid := range processesMentioning(t, h.tempDir) {
		if n, err := strconv.Atoi(pid); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(h.tempDir)
}

// assertLocalHeadGone checks, by pid, that nothing of h runs: not its
// supervisor, no process of its process group, none that mentions its
// temp dir; and that the temp dir is removed.
func assertLocalHeadGone(t *testing.T, h localHead) {
	t.Helper()
	if running(h.keeper) {
		t.Errorf("the head's supervisor (pid %d) still runs", h.keeper)
	}
	for _, g := range []int{h.keeper, h.pgid} {
		if left := groupMembers(g); g > 0 && len(left) > 0 {
			t.Errorf("processes of the head's process group %d still run:%s", g, describe(left))
		}
	}
	if left := processesMentioning(t, h.tempDir); len(left) > 0 {
		t.Errorf("processes %v of the head (temp dir %s) still run", left, h.tempDir)
	}
	if _, err := os.Stat(h.tempDir); !os.IsNotExist(err) {
		t.Errorf("the head's temp dir %s is left (stat: %v)", h.tempDir, err)
	}
}

// awaitExit waits through a pidfd until pid has exited, at most timeout.
func awaitExit(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatalf("pidfd of %d: %v", pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("pid %d still runs after %s", pid, timeout)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll the pidfd of %d: %v", pid, err)
		}
		if n > 0 {
			return
		}
	}
}

// ls returns the rows `ls -o json` prints.
func (e localEnv) ls(t *testing.T) []fleet.Record {
	t.Helper()
	code, out, errOut := e.raystep(t, "ls", "-o", "json")
	if code != 0 {
		t.Fatalf("ls exited %d: %s", code, errOut)
	}
	var rows []fleet.Record
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("ls -o json: %v\n%s", err, out)
	}
	return rows
}

// rayStarts counts the `ray start` invocations so far.
func (e localEnv) rayStarts() int {
	b, _ := os.ReadFile(e.invocations)
	return strings.Count(string(b), " start ")
}

// startRetries counts, in what raystep printed or sent, the `ray start`s
// rayhead made again after a start that failed in a way worth retrying.
func startRetries(outputs ...string) int {
	n := 0
	for _, out := range outputs {
		n += strings.Count(out, "ray head did not start (attempt")
	}
	return n
}

// TestLocalUpLifecycle: up starts a detached head, and the page of the
// built `raystep ui`, open in chromium, shows its row live (pageWatch); a
// step borrows it (its log shows, the head outlives it); ls lists it;
// dashboard prints its dashboard, notebook says it has none; up on the
// live name moves its expiry and starts nothing; down stops every process
// of it, and its row leaves the page without a reload.
func TestLocalUpLifecycle(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	page := e.watchPage(t)
	rec := e.up(t, "life", "--ttl", "10m", "--cpus", "1")
	page.awaitUp(t, "life", rec)
	h := e.head(t, rec.SupervisorPid)
	if h.tempDir != rec.TempDir {
		t.Fatalf("ray started with --temp-dir=%s, the record says %s", h.tempDir, rec.TempDir)
	}
	if heads := startedHeads(t, e.invocations); len(heads) > 1 {
		t.Logf("up started ray %d times", len(heads))
		for _, failed := range heads[:len(heads)-1] {
			if left := processesMentioning(t, failed.tempDir); len(left) > 0 {
				t.Errorf("processes %v of a failed start (temp dir %s) still run", left, failed.tempDir)
			}
		}
	}
	if !running(h.keeper) || rec.Owner != "tester" {
		t.Fatalf("after up: supervisor %d running %v, owner %q; want running, tester", h.keeper, running(h.keeper), rec.Owner)
	}

	spec := filepath.Join(t.TempDir(), "step.yaml")
	if err := os.WriteFile(spec, []byte(`apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: borrower, owner: tester}
spec:
  kind: train
  entrypoint: python -c "print('borrowed-head-says-hi')"
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0-py311"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.raystep(t, "run", "--cluster", "life", "-f", spec)
	if code != 0 || !strings.Contains(out, "borrowed-head-says-hi") {
		t.Fatalf("run --cluster life: exit %d, want 0 with the job's log\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "left running") || !running(h.keeper) {
		t.Errorf("the step did not leave the borrowed head running (supervisor running: %v):\n%s", running(h.keeper), errOut)
	}

	rows := e.ls(t)
	want := fleet.Record{Backend: fleet.BackendLocal, Name: "life", ClusterKind: "interactive", Owner: "tester", Kind: "interactive",
		Deployment: "ready", Dashboard: rec.DashboardURL}
	if len(rows) != 1 || rows[0].Expires == nil || !rows[0].Expires.Equal(rec.Expires) {
		t.Fatalf("ls -o json = %+v, want one row expiring %s", rows, rec.Expires)
	}
	got := rows[0]
	got.Created, got.Expires = time.Time{}, nil
	if got != want {
		t.Errorf("ls row = %+v, want %+v", got, want)
	}

	code, out, errOut = e.raystep(t, "ls")
	if fields := strings.Fields(out); code != 0 || len(fields) != 23 || strings.Join(fields[11:17], " ") != "life interactive tester - - ready" ||
		fields[22] != rec.DashboardURL {
		t.Errorf("ls: exit %d, want 0 and a table of life:\n%s%s", code, out, errOut)
	}

	if code, _, errOut := e.raystep(t, "notebook", "life"); code != 2 || !strings.Contains(errOut, "raystep up --notebook --name life") {
		t.Errorf("notebook on a cluster without one: exit %d %q, want 2 and the up --notebook hint", code, errOut)
	}
	code, out, errOut = e.raystep(t, "dashboard", "life")
	if code != 0 || strings.TrimSpace(out) != rec.DashboardURL || !strings.Contains(errOut, "RAY_AUTH_TOKEN=$(cat ") {
		t.Errorf("dashboard life: exit %d, stdout %q (want %s), stderr %q", code, out, rec.DashboardURL, errOut)
	}
	for _, args := range [][]string{{"dashboard", "nope"}, {"notebook", "Bad_Name"}, {"dashboard", "life", "--port", "9000"}} {
		if code, _, errOut := e.raystep(t, args...); code != 2 {
			t.Errorf("raystep %s: exit %d %q, want 2", strings.Join(args, " "), code, errOut)
		}
	}

	starts := e.rayStarts()
	code, _, errOut = e.raystep(t, "up", "--name", "life", "--ttl", "20m")
	ext, _ := e.record(t, "life")
	if code != 0 || !strings.Contains(errOut, "moving its expiry") || ext.SupervisorPid != h.keeper ||
		!ext.Expires.After(rec.Expires) || e.rayStarts() != starts {
		t.Errorf("up again: exit %d, supervisor %d (was %d), expires %s (was %s), %d ray starts (was %d); "+
			"want 0, the same supervisor, later, no new start\n%s", code, ext.SupervisorPid, h.keeper, ext.Expires, rec.Expires, e.rayStarts(), starts, errOut)
	}

	code, out, errOut = e.raystep(t, "down", "life")
	if code != 0 || out != "Local cluster life stopped\n" {
		t.Fatalf("down: exit %d, stdout %q, want 0 and the cluster stopped\n%s", code, out, errOut)
	}
	assertLocalHeadGone(t, h)
	if _, ok := e.record(t, "life"); ok {
		t.Errorf("down left the record of life")
	}
	// The history keeps the cluster's life, and the step it lent itself to.
	ended := finishedSteps(t, e.state)
	var kinds []string
	for _, f := range ended {
		kinds = append(kinds, f.Kind+" "+f.Spec+": "+f.Reason)
	}
	if want := []string{"interactive life: deleted by raystep down", "step borrower: succeeded"}; !slices.Equal(kinds, want) {
		t.Errorf("ls --finished after down: %q, want %q", kinds, want)
	}
	page.awaitDown(t, "life")
	if code, _, errOut := e.raystep(t, "down", "life"); code != exitUsage || !strings.Contains(errOut, "no such local cluster") {
		t.Errorf("down of a stopped cluster: exit %d, want %d and not found:\n%s", code, exitUsage, errOut)
	}
}

// TestLocalUpBadFlagsStartNothing: the built binary refuses bad flags
// with exit 2 and never runs ray nor records anything.
func TestLocalUpBadFlagsStartNothing(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	for _, args := range [][]string{
		{"--name", "Bad_Name"}, {"--ttl", "0s"}, {"--ttl", "25h"}, {"--gpu", "l4"}, {"--workers", "2"},
		{"--memory", "8Gi"}, {"--cpus", "two"}, {"--owner", "a b"}, {"--backend", "slurm"},
		{"--idle", "0"}, {"--idle", "9h"}, {"--ttl", "1h", "--idle-stop", "1h"}, {"--idle", "30m", "--idle-stop", "10m"}, {"--idle", "soon"},
	} {
		code, out, errOut := e.raystep(t, append([]string{"up"}, args...)...)
		if code != exitUsage || out != "" {
			t.Errorf("up %v: exit %d, stdout %q; want %d and nothing\n%s", args, code, out, exitUsage, errOut)
		}
	}
	if n := e.rayStarts(); n != 0 {
		t.Errorf("ray was started %d times", n)
	}
	if _, err := os.Stat(filepath.Join(e.state, "raystep")); !os.IsNotExist(err) {
		t.Errorf("the state dir was created (stat: %v)", err)
	}
}

// TestLocalUpSIGTERM: SIGTERM while up waits for its head leaves nothing
// running and nothing recorded, and up exits 143.
func TestLocalUpSIGTERM(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	cmd := exec.Command(e.bin, "up", "--name", "cut", "--cpus", "1")
	cmd.Env, cmd.Dir = e.env(), t.TempDir()
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var h localHead
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
		killHead(t, h)
	})
	h = awaitRayStart(t, e, done, stderr)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitExitCode(t, "up", done, stderr, exitSIGTERM, 2*time.Minute, "SIGTERM")
	awaitExit(t, h.keeper, time.Minute)
	assertLocalHeadGone(t, h)
	if _, ok := e.record(t, "cut"); ok {
		t.Errorf("up left a record of cut")
	}
}

// awaitRayStart waits until up ran `ray start` and returns its head: the
// supervisor is the parent of `ray start` (the wrapper's pid), the temp
// dir its --temp-dir.
func awaitRayStart(t *testing.T, e localEnv, done chan error, out *syncBuffer) localHead {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// Only catches a hang: up may wait its turn behind other heads'
	// starts (rayhead.StartSlots), and its own deadline ends that wait.
	deadline := time.After(10 * time.Minute)
	for {
		if e.rayStarts() > 0 {
			hd := startedHead(t, e.invocations)
			if f := procStat(hd.pgid); len(f) > 1 {
				keeper, _ := strconv.Atoi(f[1])
				return localHead{keeper: keeper, pgid: hd.pgid, tempDir: hd.tempDir}
			}
			t.Fatalf("`ray start` (pid %d) ended before the test saw its parent:\n%s", hd.pgid, out.String())
		}
		select {
		case err := <-done:
			t.Fatalf("up exited before it ran ray start: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("up did not run ray start within 10 minutes:\n%s", out.String())
		case <-tick.C:
		}
	}
}
