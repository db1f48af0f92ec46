// Package raytest starts real Ray heads for tests, through the same
// rayhead.Start that raystep runs in production.
//
// A head costs seconds of CPU, so a test package normally shares one:
//
//	var ray raytest.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		ray.Stop()
//		os.Exit(code)
//	}
//
//	func TestX(t *testing.T) { h := ray.Head(t); ... }
//
// Shared starts its head on first use, so tests that need no Ray pay
// nothing. The ray executable is the repository's .venv/bin/ray (found by
// walking up to go.mod), else RAYSTEP_RAY_BIN, else ray on PATH. A missing
// ray fails the test with the command that installs it: tests are never
// skipped for want of Ray.
//
// A head runs without Ray's token authentication unless its options set
// TokenAuth, as raystep's private heads do; Head.Token is then the token.
package raytest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raystep/raystep/rayhead"
)

// startWait bounds a test head's start: the wait for a turn among the
// heads starting at once on this machine (rayhead's start slots) and the
// start itself, which the head's ready timeout bounds. A suite on a busy
// 2-core machine has many heads queue up at once.
const startWait = 12 * time.Minute

// StartHead starts a head for one test and stops it in t.Cleanup. opts may
// be the zero value; RayBin defaults to RayBin(t).
func StartHead(t testing.TB, opts rayhead.Options) *rayhead.Head {
	t.Helper()
	opts = testDefaults(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	h, err := rayhead.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start ray head: %v", err)
	}
	t.Cleanup(func() { stop(t, h) })
	return h
}

// testDefaults fills RayBin and a short StopTimeout: a test head holds
// nothing worth a graceful shutdown, and Stop still kills every process.
func testDefaults(t testing.TB, opts rayhead.Options) rayhead.Options {
	if opts.RayBin == "" {
		opts.RayBin = RayBin(t)
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 3 * time.Second
	}
	return opts
}

// RayBin returns the ray executable tests use: .venv/bin/ray in the module
// root, else $RAYSTEP_RAY_BIN, else ray on PATH.
func RayBin(t testing.TB) string {
	t.Helper()
	if root, ok := moduleRoot(); ok {
		cand := filepath.Join(root, ".venv", "bin", "ray")
		if _, err := os.Stat(cand); err == nil {
			return cand
		}
	}
	bin, err := rayhead.FindRay(os.Getenv("RAYSTEP_RAY_BIN"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return bin
}

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func stop(t testing.TB, h *rayhead.Head) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Errorf("stop ray head: %v", err)
	}
}

// Shared is one head shared by the tests of a package. The zero value is
// ready to use; call Stop from TestMain after m.Run.
type Shared struct {
	// Options configures the head; RayBin defaults to RayBin.
	Options rayhead.Options

	mu   sync.Mutex
	head *rayhead.Head
	err  error
}

// Head returns the shared head, starting it on first call. A failed start
// fails every test that asks, with the same error.
func (s *Shared) Head(t testing.TB) *rayhead.Head {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == nil && s.err == nil {
		opts := testDefaults(t, s.Options)
		ctx, cancel := context.WithTimeout(context.Background(), startWait)
		defer cancel()
		s.head, s.err = rayhead.Start(ctx, opts)
	}
	if s.err != nil {
		t.Fatalf("start shared ray head: %v", s.err)
	}
	return s.head
}

// Stop stops the shared head if it was started. It is safe to call twice.
func (s *Shared) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = s.head.Stop(ctx)
	s.head = nil
}
