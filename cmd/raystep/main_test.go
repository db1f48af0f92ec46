package main

import (
	"errors"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/raystep/raystep/internal/quickstart"
	"github.com/raystep/raystep/test/raytest"
	"github.com/raystep/raystep/test/syncbuf"
)

// The tests of this package run raystep in-process: its commands, flags,
// output formats and the acceptance scripts of testdata/script. None
// starts a Ray head of its own or builds the binary: test/e2e drives the
// built binary, against real Ray. The one test that runs a step in-process
// (TestNoticeDagsterMissed) runs it on rayHead, the session's shared head
// under make test.

// TestMain also makes this test binary the raystep command of the
// testscript scripts (script_test.go).
func TestMain(m *testing.M) {
	quickstart.Done() // as main does
	testscript.Main(stopHead{m}, map[string]func(){"raystep": scriptMain})
}

// scriptMain is main as the scripts run it, with the OS's name for the
// user taken from TEST_LOGIN_NAME when a script sets it (empty: a user
// with no name, as an arbitrary container UID is).
func scriptMain() {
	if name, ok := os.LookupEnv("TEST_LOGIN_NAME"); ok {
		loginName = func() (string, error) {
			if name == "" {
				return "", errors.New("user ID 1000 has no name here")
			}
			return name, nil
		}
	}
	main()
}

// stopHead runs the tests, then stops rayHead (testscript.Main exits).
// The tests run in parallel on every processor; the scripts' raystep runs
// on one, as the binary does.
type stopHead struct{ m *testing.M }

func (s stopHead) Run() int {
	quickstart.Parallel()
	defer rayHead.Stop()
	return s.m.Run()
}

// rayHead is the head tests that run a step share: the session's under
// make test, else one this package starts on first use.
var rayHead raytest.Shared

// syncBuffer is safe for a writer and a reader at once.
type syncBuffer = syncbuf.Buffer
