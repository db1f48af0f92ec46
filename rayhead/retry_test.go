package rayhead

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raystep/raystep/test/fakeray"
)

// TestStartTellsWarnItStartsAgain: a head whose raylet registered too late
// (Ray's fixed 30 s on a busy machine) is started again, and the person
// waiting is told so through Warn, with Ray's reason, not only a debug log.
func TestStartTellsWarnItStartsAgain(t *testing.T) {
	fake, dir := fakeray.New(t)
	once := filepath.Join(dir, "failed-once")
	rayBin := filepath.Join(dir, "ray-late-raylet")
	script := "#!/bin/sh\nif [ ! -e '" + once + "' ]; then\n  touch '" + once + "'\n" +
		"  echo 'The raylet timed out during startup.' >&2\n  exit 1\nfi\nexec '" + fake + "' \"$@\"\n"
	if err := os.WriteFile(rayBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warnings []string
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := Start(ctx, Options{RayBin: rayBin, StopTimeout: time.Second, tempRoot: t.TempDir(),
		Warn: func(msg string) { mu.Lock(); defer mu.Unlock(); warnings = append(warnings, msg) }})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = h.Stop(context.Background()) }()
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "ray head did not start (attempt 1 of 3); starting it again: ") ||
		!strings.Contains(warnings[0], "timed out during startup") {
		t.Errorf("warnings %q, want one that says the head is started again and why", warnings)
	}
}

// TestStartRestartsAHungRayStart: a `ray start` that printed its first
// lines and then hung inside Ray, never saying its node is up, is stopped
// and started again instead of being waited on for the whole ReadyTimeout.
func TestStartRestartsAHungRayStart(t *testing.T) {
	fake, dir := fakeray.New(t)
	once := filepath.Join(dir, "hung-once")
	rayBin := filepath.Join(dir, "ray-hangs")
	script := "#!/bin/sh\nif [ ! -e '" + once + "' ]; then\n  touch '" + once + "'\n" +
		"  echo 'Local node IP: 127.0.0.1'\n  exec sleep 3600\nfi\nexec '" + fake + "' \"$@\"\n"
	if err := os.WriteFile(rayBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warnings []string
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// ReadyTimeout is far beyond the test's own bound: only the stall can
	// end the first attempt.
	h, err := Start(ctx, Options{RayBin: rayBin, StopTimeout: time.Second, tempRoot: t.TempDir(),
		ReadyTimeout: time.Hour, stall: 2 * time.Second,
		Warn: func(msg string) { mu.Lock(); defer mu.Unlock(); warnings = append(warnings, msg) }})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = h.Stop(context.Background()) }()
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "did not say \"Ray runtime started.\" within 2s") ||
		!strings.Contains(warnings[0], "Local node IP: 127.0.0.1") {
		t.Errorf("warnings %q, want one that says ray start hung, with its output", warnings)
	}
}
