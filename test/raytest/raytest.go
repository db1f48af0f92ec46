// Package raytest gives tests real Ray heads, started through the same
// rayhead.Start that raystep runs in production.
//
// A head start keeps one and a half cores busy for 10 to 13 s, so tests
// share heads:
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
// Under `make test`, test/suite starts one plain session head and one
// with Ray's token authentication for the whole run and names a file
// describing each in RAYSTEP_TEST_HEAD and RAYSTEP_TEST_TOKEN_HEAD; Shared
// then hands out the session head of its kind (Options.TokenAuth) and
// starts nothing. Without them (go test ./pkg alone), or when the session
// head is gone, Shared starts a head of its own on first use, so tests
// that need no Ray pay nothing. Tests that share a head must not share
// identities: each gives its steps a run id or name of its own (RunID).
//
// StartHead starts a private head for one test: only for tests whose
// subject is a head's own lifecycle (start, stop, death, detach), which
// say so in a comment.
//
// The ray executable is RAYSTEP_RAY_BIN when set (test/suite points it at
// its counting ray), else the repository's .venv/bin/ray (found by walking
// up to go.mod), else ray on PATH. A missing ray fails the test with the
// command that installs it: tests are never skipped for want of Ray.
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

// RayBin returns the ray executable tests use: $RAYSTEP_RAY_BIN, else
// .venv/bin/ray in the module root, else ray on PATH.
func RayBin(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("RAYSTEP_RAY_BIN"); bin != "" {
		abs, err := rayhead.FindRay(bin)
		if err != nil {
			t.Fatalf("%v", err)
		}
		return abs
	}
	if root, ok := moduleRoot(); ok {
		cand := filepath.Join(root, ".venv", "bin", "ray")
		if _, err := os.Stat(cand); err == nil {
			return cand
		}
	}
	bin, err := rayhead.FindRay("")
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

// Head is a running head as tests use it: a private one (*rayhead.Head)
// or the session's.
type Head interface {
	// DashboardURL is the dashboard's base URL, e.g. http://127.0.0.1:41234.
	DashboardURL() string
	// Address is the GCS address (host:port), the value for RAY_ADDRESS.
	Address() string
	// Token is the head's token; empty without token auth.
	Token() string
	// TokenFile is a 0600 file holding Token; empty without token auth.
	TokenFile() string
	// TempDir is Ray's root temp dir for the head.
	TempDir() string
}

var _ Head = (*rayhead.Head)(nil)

// Shared is a head shared by the tests of a package: the session's, or
// one of the package's own. The zero value is ready to use; call Stop
// from TestMain after m.Run.
type Shared struct {
	// Options configures the package's own head; RayBin defaults to
	// RayBin. Of a session head only its kind is chosen: TokenAuth.
	Options rayhead.Options

	mu   sync.Mutex
	head Head
	own  *rayhead.Head
	err  error
}

// Head returns the shared head, starting the package's own on first call
// when there is no usable session head. A failed start fails every test
// that asks, with the same error.
func (s *Shared) Head(t testing.TB) Head {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == nil && s.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), startWait)
		defer cancel()
		if file := os.Getenv(sessionEnv(s.Options.TokenAuth)); file != "" {
			h, err := attach(ctx, file, s.Options.TokenAuth, answerWithin)
			if err == nil {
				s.head = h
				return s.head
			}
			t.Logf("%v; this package starts a head of its own", err)
		}
		opts := testDefaults(t, s.Options)
		s.own, s.err = rayhead.Start(ctx, opts)
		if s.err == nil {
			s.head = s.own
		}
	}
	if s.err != nil {
		t.Fatalf("start shared ray head: %v", s.err)
	}
	return s.head
}

// Stop stops the package's own head if it started one; a session head is
// the session's to stop. It is safe to call twice.
func (s *Shared) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = s.own.Stop(ctx)
	s.own, s.head = nil, nil
}
