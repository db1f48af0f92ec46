package e2e

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/test/jupytertest"
)

// TestLocalIdleStop: the supervisor of a local head brought up with
// --idle-stop (locally the same as --idle: the head is the only node)
// stops it once idle that long, with no raystep running: not while
// a Ray job runs on it, not while a notebook kernel executes code, and
// once both are done, by itself; ls shows since when it is idle before,
// and the head is gone after. The head's own end is what this proves, so
// it has a head of its own.
func TestLocalIdleStop(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	const idle = 4 * time.Second
	rec := e.up(t, "idler", "--ttl", "10m", "--cpus", "1", "--idle-stop", idle.String(), "--notebook")
	h := e.head(t, rec.SupervisorPid)
	// The supervisor asks every quarter of --idle, at least every second:
	// two of its looks after a moment have seen that moment.
	settle := idle + 2*time.Second + time.Second

	// A Ray job runs past the idle window: the head stays.
	token, err := os.ReadFile(rec.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ray, err := raysubmit.New(raysubmit.Config{BaseURL: rec.DashboardURL, Token: strings.TrimSpace(string(token)), UserAgent: "raystep-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ray.Submit(t.Context(), raysubmit.SubmitRequest{SubmissionID: "idle-busy", Entrypoint: "sleep 600"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Now().Add(settle))
	stillUp(t, e, h.keeper, "while a Ray job runs")

	// A kernel executes code while the job ends: the head stays.
	code, out, errOut := e.raystep(t, "notebook", "idler")
	nb, perr := url.Parse(strings.TrimSpace(out))
	if code != 0 || perr != nil {
		t.Fatalf("notebook idler: exit %d %q\n%s", code, out, errOut)
	}
	k := jupytertest.StartBusy(t, nb)
	if _, err := ray.Stop(t.Context(), "idle-busy"); err != nil {
		t.Fatal(err)
	}
	if _, err := ray.Wait(t.Context(), "idle-busy"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Now().Add(settle))
	stillUp(t, e, h.keeper, "while a notebook kernel is busy")

	// Nothing runs: ls says since when, and the supervisor stops the head.
	k.Interrupt(t)
	deadline := time.Now().Add(time.Minute)
	for seen := false; !seen; {
		rows := e.ls(t)
		if len(rows) != 1 || rows[0].Deployment != "ready" {
			t.Fatalf("ls while idle = %+v, want idler ready", rows)
		}
		seen = rows[0].IdleSince != nil
		if !seen && time.Now().After(deadline) {
			t.Fatal("ls never showed since when idler is idle")
		}
	}
	awaitExit(t, h.keeper, 3*time.Minute)
	assertLocalHeadGone(t, h)
	log, _ := os.ReadFile(fmt.Sprintf("%s/raystep/clusters/idler.log", e.state))
	if !strings.Contains(string(log), "stopping the head: idle for") {
		t.Errorf("the supervisor's log does not say it stopped the head for idleness:\n%s", log)
	}
	if rows := e.ls(t); len(rows) != 1 || rows[0].Deployment != "gone" {
		t.Errorf("ls after the idle stop = %+v, want idler gone", rows)
	}
}

// stillUp fails the test if the head's supervisor ended, or ls says the
// cluster is idle.
func stillUp(t *testing.T, e localEnv, keeper int, when string) {
	t.Helper()
	if !running(keeper) {
		t.Fatalf("the supervisor stopped the head %s", when)
	}
	if rows := e.ls(t); len(rows) != 1 || rows[0].IdleSince != nil {
		t.Errorf("ls %s = %+v, want one cluster, not idle", when, rows)
	}
}

// waitUntil waits until this machine's clock has passed at.
func waitUntil(t *testing.T, at time.Time) {
	t.Helper()
	select {
	case <-time.After(time.Until(at)):
	case <-t.Context().Done():
		t.Fatal("test ended while waiting for the clock")
	}
}
