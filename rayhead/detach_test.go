package rayhead

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/test/fakeray"
)

// writeExpiry writes record as a detached head's record holding expires,
// the way raystep does: to a temporary file renamed over it.
func writeExpiry(t *testing.T, record string, expires time.Time) {
	t.Helper()
	tmp := record + ".tmp"
	body := fmt.Sprintf(`{"name": "c", "expires": %q}`, expires.UTC().Format(time.RFC3339))
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, record); err != nil {
		t.Fatal(err)
	}
}

// waitForLog waits until the log at path holds want.
func waitForLog(ctx context.Context, t *testing.T, path, want string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the log never said %q; it holds:\n%s", want, b)
		case <-tick.C:
		}
	}
}

// startDetached starts a detached fake head, gives it a record that
// expires ttl after it is ready (rounded up to a second), detaches it and
// kills all of it at the end of the test.
func startDetached(ctx context.Context, t *testing.T, ttl time.Duration) (h *Head, record, log string, pids []proc, expires time.Time) {
	t.Helper()
	rayBin, dir := fakeray.New(t)
	state := t.TempDir()
	record, log = filepath.Join(state, "c.json"), filepath.Join(state, "c.log")
	h, err := Start(ctx, Options{RayBin: rayBin, StopTimeout: time.Second, tempRoot: t.TempDir(),
		Detach: &DetachOptions{Record: record, Log: log}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pids = append(readPids(t, dir), procsOf(h.Pid(), h.KeeperPid())...)
	t.Cleanup(func() {
		for _, p := range pids {
			p.kill()
		}
	})
	expires = time.Now().Add(ttl).Truncate(time.Second).Add(time.Second)
	writeExpiry(t, record, expires)
	if err := h.Detach(ctx); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	return h, record, log, pids, expires
}

// TestDetachedKeeperFollowsItsRecord detaches a head, so that its
// starter's end (the control pipe closed) no longer stops it, moves its
// expiry later by rewriting the record alone, then earlier with Reload,
// and checks that the keeper stopped the head at that expiry, not before:
// every process gone, the temp dir removed, the log saying why.
func TestDetachedKeeperFollowsItsRecord(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, record, log, pids, first := startDetached(ctx, t, time.Second)
	d := Detached{Pid: h.KeeperPid(), TempDir: h.TempDir()}

	later := time.Now().Add(time.Hour).Truncate(time.Second)
	writeExpiry(t, record, later)
	// The keeper reads the record again at the expiry it knew; had it
	// stopped the head then, Done would close before the last expiry.
	waitForLog(ctx, t, log, "expiry "+later.UTC().Format(time.RFC3339))
	select {
	case <-time.After(time.Until(first)):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if !d.Running() {
		t.Fatalf("the keeper ended at its first expiry although its record was rewritten")
	}
	if !versionOK(ctx, &http.Client{Timeout: 5 * time.Second}, h.DashboardURL()+"/api/version", "") {
		t.Errorf("the head's dashboard does not answer after its first expiry")
	}

	last := time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second)
	writeExpiry(t, record, last)
	if err := d.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the keeper did not stop the head at its expiry")
	}
	if now := time.Now(); now.Before(last) {
		t.Errorf("the head stopped at %v, before its expiry %v", now, last)
	}
	if err := h.keeper.result(); err != nil {
		t.Errorf("the keeper reported: %v", err)
	}
	for _, p := range pids {
		if p.running() {
			t.Errorf("process %d of the head still runs", p.pid)
		}
	}
	if _, err := os.Stat(h.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s left behind (stat: %v)", h.TempDir(), err)
	}
	waitForLog(ctx, t, log, "stopping the head: it expired")
	if d.Running() {
		t.Errorf("Running() after the keeper ended")
	}
}

// TestDetachedStopKnowsOnlyThePidAndTempDir stops a detached head as a
// later raystep command does, from the record alone.
func TestDetachedStopKnowsOnlyThePidAndTempDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, _, log, pids, _ := startDetached(ctx, t, time.Hour)
	if (Detached{Pid: h.KeeperPid(), TempDir: h.TempDir() + "x"}).Running() {
		t.Errorf("Running() with another temp dir: a pid alone must not identify the keeper")
	}
	d := Detached{Pid: h.KeeperPid(), TempDir: h.TempDir()}
	if !d.Running() {
		t.Fatalf("Running() = false for a live keeper")
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, p := range pids {
		if p.running() {
			t.Errorf("process %d of the head still runs", p.pid)
		}
	}
	if _, err := os.Stat(h.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s left behind (stat: %v)", h.TempDir(), err)
	}
	waitForLog(ctx, t, log, "stopping the head: SIGTERM")
	if err := d.Reload(); !errors.Is(err, ErrKeeperGone) {
		t.Errorf("Reload after Stop = %v, want ErrKeeperGone", err)
	}
	if err := d.Stop(ctx); err != nil {
		t.Errorf("Stop again: %v", err)
	}
}

// TestDetachedNeedsARecord checks that Detach refuses a step's head.
func TestDetachedNeedsARecord(t *testing.T) {
	t.Parallel()
	rayBin, _ := fakeray.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := Start(ctx, Options{RayBin: rayBin, StopTimeout: time.Second, tempRoot: t.TempDir()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = h.Stop(context.Background()) }()
	if err := h.Detach(ctx); err == nil || !strings.Contains(err.Error(), "not started with Options.Detach") {
		t.Errorf("Detach of a step's head = %v", err)
	}
}
