package main

import (
	"bytes"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/raystep/raystep/internal/quickstart"
)

// The tests of this package run raystep in-process: its commands, flags,
// output formats and the acceptance scripts of testdata/script. None
// starts a Ray head or builds the binary: test/e2e drives the built
// binary, against real Ray.

// TestMain also makes this test binary the raystep command of the
// testscript scripts (script_test.go).
func TestMain(m *testing.M) {
	quickstart.Done() // as main does
	testscript.Main(m, map[string]func(){"raystep": main})
}

// syncBuffer is a bytes.Buffer safe for the runner's writers and a test
// that reads while raystep runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
