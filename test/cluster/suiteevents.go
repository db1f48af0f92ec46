package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// suiteEventsEnv names the file where the test suite's runner
// (test/suite/run.sh) counts the expensive things tests start: every
// control plane is one line there, as every Ray head is (test/suite/ray).
const suiteEventsEnv = "RAYSTEP_SUITE_EVENTS"

// countStart appends one line for a control plane started by this process
// to $RAYSTEP_SUITE_EVENTS, if set, in test/suite/ray's format: the time,
// the kind, and who started it (a pytest test, or a Go test binary's
// package directory). Counting is best effort: it never fails a start.
func countStart(kind string) {
	path := os.Getenv(suiteEventsEnv)
	if path == "" {
		return
	}
	who := "other"
	if id := os.Getenv("PYTEST_CURRENT_TEST"); id != "" {
		who = "pytest:" + strings.Fields(id)[0]
	} else if strings.HasSuffix(filepath.Base(os.Args[0]), ".test") {
		if wd, err := os.Getwd(); err == nil {
			who = "go:" + wd
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	now := time.Now()
	_, _ = fmt.Fprintf(f, "%d.%09d\t%s\t%s\t\n", now.Unix(), now.Nanosecond(), kind, who)
}
