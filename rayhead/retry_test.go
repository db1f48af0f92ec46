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
