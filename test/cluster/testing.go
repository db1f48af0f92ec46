package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"
)

// startTimeout bounds New's start of the whole environment; the binaries
// are expected to be built already (test/k8s/build.sh in CI).
const startTimeout = 5 * time.Minute

// New starts a cluster for one test and stops it in t.Cleanup. If the test
// failed, the tail of every component's log is written to the test log
// first. Start errors fail the test at once.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.LogDir == "" {
		opts.LogDir = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, opts)
	if err != nil {
		dumpLogs(t, opts.LogDir)
		t.Fatalf("start cluster: %v", err)
	}
	t.Logf("cluster started in %s (logs: %s)", time.Since(start).Round(time.Millisecond), c.LogDir)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, c.LogDir)
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(stopCtx); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	return c
}

// logTailBytes is how much of each component log a failed test prints.
const logTailBytes = 8 << 10

// dumpLogs writes the tail of every component log in dir to the test log.
func dumpLogs(t testing.TB, dir string) {
	t.Helper()
	c := &Cluster{LogDir: dir}
	for _, path := range c.LogFiles() {
		tail, err := readTail(path, logTailBytes)
		if err != nil {
			t.Logf("read %s: %v", path, err)
			continue
		}
		t.Logf("=== %s (last %d bytes) ===\n%s", path, len(tail), tail)
	}
}

func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := st.Size() - n; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, fmt.Errorf("seek: %w", err)
		}
	}
	return io.ReadAll(f)
}
