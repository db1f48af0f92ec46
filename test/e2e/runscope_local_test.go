package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// Run-scoped and borrowed clusters of the local backend, end to end with
// the built binary: the steps of one Dagster run share one detached head,
// `down --dagster-run-id` stops it, and a step on a borrowed head fails
// at once when that head reaches its expiry.

// rendezvous is a job that creates its own marker file, then waits until
// the other step's exists: two steps with crossed markers can only both
// end while both jobs run at once.
const rendezvous = `python -c "import os, sys, time; open(sys.argv[1], 'w').close(); ` +
	`[time.sleep(0.05) for _ in iter(lambda: os.path.exists(sys.argv[2]), True)]; print('met', sys.argv[2])"`

// writeStep writes a step spec running entrypoint and returns its path.
func writeStep(t *testing.T, name, entrypoint string, more string) string {
	t.Helper()
	spec := filepath.Join(t.TempDir(), "step.yaml")
	body := fmt.Sprintf(`apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: %s, owner: tester}
spec:
  kind: train
  entrypoint: %q
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0-py311"%s}
  timeouts: {provision: 1m, run: 10m}
`, name, entrypoint, more)
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestLocalRunScopedSharesOneHead: two steps of one Dagster run with
// reuse: run, started together, run at the same time on one detached
// head (one `ray start`, one record, KIND run in ls), both succeed and
// leave it running; `down --dagster-run-id` stops every process of it.
func TestLocalRunScopedSharesOneHead(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	run := "7a4b2c1d-" + fmt.Sprint(time.Now().UnixNano()%100000)
	name := runner.RunClusterName(run, runner.ClusterHash(schemas.Cluster{}))
	t.Cleanup(func() { e.cleanup(t, name) })
	spec := writeStep(t, "shared", "python -c pass", ", reuse: run")
	gates := t.TempDir()
	type result struct {
		code         int
		out, errOut  string
		messagesPath string
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for k, asset := range []string{"e2e/model", "e2e/auc"} {
		env, msgs := pipesEnv(t, pipes.ContextData{RunID: run, AssetKeys: []string{asset}, Extras: map[string]any{}})
		mine, theirs := filepath.Join(gates, asset[4:]), filepath.Join(gates, []string{"auc", "model"}[k])
		wg.Go(func() {
			r := &results[k]
			r.messagesPath = msgs
			// No CPU of the head for the drivers: both must fit at once.
			r.code, r.out, r.errOut = e.raystepWith(t, env, "run", "-f", spec, "--set", "spec.entrypointResources.cpus=0",
				"--set", "spec.entrypoint="+rendezvous+" "+mine+" "+theirs)
		})
	}
	wg.Wait()
	var said []string
	for k, r := range results {
		if r.code != 0 {
			t.Fatalf("step %d exited %d, want 0\nstdout:\n%s\nstderr:\n%s", k, r.code, r.out, r.errOut)
		}
		b, err := os.ReadFile(r.messagesPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, how := range []string{"started", "attached to"} {
			if strings.Contains(string(b), how+" the run-scoped private head "+name) {
				said = append(said, how)
			}
		}
	}
	if strings.Join(said, ",") != "started,attached to" && strings.Join(said, ",") != "attached to,started" {
		t.Errorf("the steps said %q of head %s, want one started and one attached to", said, name)
	}
	// A start that failed in a way worth retrying is started again (and
	// said so); a busy machine provokes that. Only one head may come up.
	retries := 0
	for _, r := range results {
		b, _ := os.ReadFile(r.messagesPath)
		retries += startRetries(string(b), r.errOut)
	}
	if n := e.rayStarts(); n != 1+retries {
		t.Errorf("two steps of one run ran `ray start` %d times with %d retries, want 1 head", n, retries)
	}
	records, err := filepath.Glob(filepath.Join(e.state, "raystep", "clusters", "*.json"))
	if err != nil || len(records) != 1 {
		t.Fatalf("records %v (%v), want the run's one", records, err)
	}
	rec, ok := e.record(t, name)
	if !ok || rec.Owner != "dagster-run:"+run || !running(rec.SupervisorPid) {
		t.Fatalf("record of %s: %+v (%v), want owner dagster-run:%s and a running supervisor", name, rec, ok, run)
	}
	h := e.head(t, rec.SupervisorPid)
	if rows := e.ls(t); len(rows) != 1 || rows[0].Name != name || rows[0].ClusterKind != "run" || rows[0].Deployment != "ready" {
		t.Errorf("ls -o json = %+v, want %s of KIND run, ready", rows, name)
	}

	code, out, errOut := e.raystep(t, "down", "--dagster-run-id", run)
	if code != 0 || out != "private head "+name+" deleted\n" {
		t.Fatalf("down --dagster-run-id: exit %d, stdout %q, want 0 and the head deleted\n%s", code, out, errOut)
	}
	assertLocalHeadGone(t, h)
	if code, out, _ := e.raystep(t, "down", "--dagster-run-id", run); code != 0 || !strings.Contains(out, "nothing to delete") {
		t.Errorf("down --dagster-run-id again: exit %d, %q, want 0 and nothing to delete", code, out)
	}
}

// TestLocalUpExpiry: the supervisor stops an up head at its expiry by
// itself (up has exited; the one raystep left is a step that borrows the
// head, which never stops a borrowed head). Its expiry comes while the
// step's job runs (up --ttl 3s moves it near): the step fails (exit 3)
// saying so, within 2 minutes with teardown on a busy machine, while the
// dashboard-outage bound is 30 minutes; the head is gone; ls then says
// expired and gc clears the record away.
func TestLocalUpExpiry(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	rec := e.up(t, "short", "--ttl", "10m", "--cpus", "1")
	h := e.head(t, rec.SupervisorPid)
	spec := writeStep(t, "borrower", `python -c "import time; print('job-running', flush=True); time.sleep(600)"`, "")
	cmd := exec.Command(e.bin, "run", "--cluster", "short", "-f", spec)
	// An outage bound far away: only the expiry can end the step soon.
	cmd.Env, cmd.Dir = append(e.env(), "RAYSTEP_DASHBOARD_OUTAGE=30m"), t.TempDir()
	stderr, done := runUntilLine(t, cmd, e.invocations, "job-running", nil)
	if code, _, errOut := e.raystep(t, "up", "--name", "short", "--ttl", "3s"); code != 0 {
		t.Fatalf("up --ttl 3s: exit %d\n%s", code, errOut)
	}
	moved, _ := e.record(t, "short")
	var err error
	select {
	case err = <-done:
		done <- err // for the cleanup
	case <-time.After(3 * time.Minute):
		t.Fatalf("the step still runs 3m after its cluster's expiry:\n%s", stderr.String())
	}
	ended := time.Now()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInfrastructure ||
		!strings.Contains(stderr.String(), "local cluster short, which the step borrows, reached its expiry") {
		t.Fatalf("run --cluster short past its expiry: %v, want exit %d saying the cluster expired\n%s", err, exitInfrastructure, stderr.String())
	}
	t.Logf("FIGURES the step failed %s after its borrowed cluster's expiry", ended.Sub(moved.Expires).Round(time.Millisecond))
	if late := ended.Sub(moved.Expires); late > 2*time.Minute {
		t.Errorf("the step failed %s after the expiry, want promptly", late.Round(time.Second))
	}
	// The keeper stops the head at its expiry, the job with it: the step
	// does not ask the dashboard of a head going away to stop the job, and
	// ends once the keeper is done.
	for _, want := range []string{"ended with its cluster", "is gone (not owned by this step)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the step's teardown did not say %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "stop ray job") {
		t.Errorf("the step asked the expired cluster to stop its job:\n%s", stderr.String())
	}
	if (rayhead.Detached{Pid: h.keeper, TempDir: h.tempDir}).Running() {
		t.Errorf("the step ended while the keeper of the cluster it borrowed still ran")
	}
	awaitExit(t, h.keeper, 3*time.Minute)
	if now := time.Now(); now.Before(moved.Expires) {
		t.Errorf("the supervisor ended at %s, before the expiry %s", now, moved.Expires)
	}
	assertLocalHeadGone(t, h)
	if rows := e.ls(t); len(rows) != 1 || rows[0].Deployment != "expired" {
		t.Errorf("ls after the expiry = %+v, want short expired", rows)
	}
	code, out, errOut := e.raystep(t, "gc")
	if code != 0 || out != "removed local cluster short: expired, its head no longer runs\n" {
		t.Errorf("gc: exit %d, stdout %q\n%s", code, out, errOut)
	}
	if _, ok := e.record(t, "short"); ok {
		t.Errorf("gc left the record of short")
	}
}
