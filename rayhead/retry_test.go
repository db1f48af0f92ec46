package rayhead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raystep/raystep/test/fakeray"
)

// startFailingOnce starts a head whose first `ray start` runs firstTry
// (shell lines) instead of Ray, and every later one the fake ray; it
// returns what Warn was told.
func startFailingOnce(t *testing.T, firstTry string, opts Options) []string {
	t.Helper()
	fake, dir := fakeray.New(t)
	once := filepath.Join(dir, "first-try-done")
	opts.RayBin = filepath.Join(dir, "ray-first-try")
	script := "#!/bin/sh\nif [ ! -e '" + once + "' ]; then\n  touch '" + once + "'\n" + firstTry +
		"fi\nexec '" + fake + "' \"$@\"\n"
	if err := os.WriteFile(opts.RayBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warnings []string
	opts.Warn = func(msg string) { mu.Lock(); defer mu.Unlock(); warnings = append(warnings, msg) }
	opts.StopTimeout, opts.tempRoot = time.Second, t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return warnings
}

// TestStartTellsWarnItStartsAgain: a head whose raylet registered too late
// (Ray's fixed 30 s on a busy machine) is started again, and the person
// waiting is told so through Warn, with Ray's reason, not only a debug log.
func TestStartTellsWarnItStartsAgain(t *testing.T) {
	warnings := startFailingOnce(t, "  echo 'The raylet timed out during startup.' >&2\n  exit 1\n", Options{})
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "ray head did not start (attempt 1 of 3); starting it again: ") ||
		!strings.Contains(warnings[0], "timed out during startup") {
		t.Errorf("warnings %q, want one that says the head is started again and why", warnings)
	}
}

// TestStartRestartsAHungRayStart: a `ray start` that printed its first
// lines and then hung inside Ray, never saying its node is up, is stopped
// and started again instead of being waited on for the whole ReadyTimeout
// (far beyond the test's own bound: only the stall can end the first try).
func TestStartRestartsAHungRayStart(t *testing.T) {
	warnings := startFailingOnce(t, "  echo 'Local node IP: 127.0.0.1'\n  exec sleep 3600\n",
		Options{ReadyTimeout: time.Hour, stall: 2 * time.Second})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "did not say \"Ray runtime started.\" within 2s") ||
		!strings.Contains(warnings[0], "Local node IP: 127.0.0.1") {
		t.Errorf("warnings %q, want one that says ray start hung, with its output", warnings)
	}
}

// TestStartRestartsAHeadWhoseRayClientServerLostItsPort: a `ray start`
// whose Ray Client server found its port taken says its node is up and
// its dashboard answers, and only then stops the head, as Ray does a
// second later. The head is not handed over as ready in between: it is
// started again, and Warn is told Ray's reason.
func TestStartRestartsAHeadWhoseRayClientServerLostItsPort(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("the stand-in needs python3")
	}
	firstTry := `  for a; do case $a in --dashboard-port=*) port=${a#*=};; --ray-client-server-port=*) client=${a#*=};; esac; done
  echo 'Ray runtime started.'
  cd "$(dirname "$0")/www" && ` + python + ` -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1 &
  sleep 3
  echo "RuntimeError: Failed to bind to address 127.0.0.1:$client" >&2
  kill $!
  exit 1
`
	warnings := startFailingOnce(t, firstTry, Options{})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "starting it again") ||
		!strings.Contains(warnings[0], "Failed to bind to address") {
		t.Errorf("warnings %q, want one that says the head is started again because a port was taken", warnings)
	}
}

// TestStartRestartsAHeadWithoutItsDashboard: Ray goes on without a
// dashboard whose port was taken, says so and says its node is up. No
// answer will come, so the head is started again at once rather than
// waited on for the whole ReadyTimeout (beyond the test's own bound).
func TestStartRestartsAHeadWithoutItsDashboard(t *testing.T) {
	firstTry := `  for a; do case $a in --dashboard-port=*) port=${a#*=};; esac; done
  echo "Failed to bind to 127.0.0.1:$port because it's already occupied."
  echo 'Ray runtime started.'
  exec sleep 3600
`
	warnings := startFailingOnce(t, firstTry, Options{ReadyTimeout: time.Hour})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "went on without it") ||
		!strings.Contains(warnings[0], "already occupied") {
		t.Errorf("warnings %q, want one that says the head is started again because its dashboard's port was taken", warnings)
	}
}

// TestStartRestartsAHeadWhoseAgentLostItsPort: a Ray agent that found the
// port startArgs reserved taken exits, and the raylet with it; `ray start`
// says its node is up and its dashboard answers meanwhile, and stops the
// head only ten seconds later, saying no more than that an agent failed.
// The head is not handed over as ready: it is started again, and Warn
// names the agent's log.
func TestStartRestartsAHeadWhoseAgentLostItsPort(t *testing.T) {
	firstTry := `  for a; do case $a in --temp-dir=*) tmp=${a#*=};; esac; done
  mkdir -p "$tmp/session_latest/logs"
  printf '    sock.bind(sockaddr)\nOSError: [Errno 98] Address already in use\n' > "$tmp/session_latest/logs/runtime_env_agent.err"
`
	warnings := startFailingOnce(t, firstTry, Options{})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "starting it again") ||
		!strings.Contains(warnings[0], "runtime_env_agent.err") {
		t.Errorf("warnings %q, want one that says the head is started again because an agent lost its port", warnings)
	}
}

// TestStartWarnsBriefly: a retry's warning gives Ray's reason in a line,
// not the Python traceback `ray start` printed before it: the step goes
// on, and the warning stays in its log and in Dagster's.
func TestStartWarnsBriefly(t *testing.T) {
	firstTry := `  echo 'Local node IP: 127.0.0.1'
  echo "Failed to get node info b'RPC error: Deadline Exceeded'"
  echo 'Traceback (most recent call last):' >&2
  for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    echo '  File "/venv/lib/python3.11/site-packages/click/core.py", line 1414, in invoke' >&2
    echo '    return ctx.invoke(self.callback, **ctx.params)' >&2
    echo '           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^' >&2
  done
  echo 'Exception: The current node timed out during startup. This could happen because some of the raylet failed to startup or the GCS has become overloaded.' >&2
  exit 1
`
	warnings := startFailingOnce(t, firstTry, Options{})
	// Which of Start's checks sees the failure first, the output's words
	// or the exit, is a race; either way the warning ends with Ray's reason.
	const (
		prefix = "ray head did not start (attempt 1 of 3); starting it again: ray head failed to start: "
		suffix = `; ray start said "Exception: The current node timed out during startup. ` +
			`This could happen because some of the raylet failed to startup or the GCS has become overloaded."`
	)
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], prefix) || !strings.HasSuffix(warnings[0], suffix) ||
		strings.Contains(warnings[0], "Traceback") || strings.Contains(warnings[0], "went on without it") {
		t.Errorf("warnings %q, want one that starts %q and ends %q, without the traceback", warnings, prefix, suffix)
	}
}

func TestTellingLine(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"the last line", "Local node IP: 127.0.0.1\nUsage stats collection is disabled.\n", "Usage stats collection is disabled."},
		{"a port taken, before the last line", "Failed to bind to 127.0.0.1:8265 because it's already occupied.\nRay runtime started.\n",
			"Failed to bind to 127.0.0.1:8265 because it's already occupied."},
		{"state dumps skipped", "raylet exited\n[2026-12-07 04:47:57,396 I 1 1] (raylet) [state-dump] NodeManager:\n  \n",
			"raylet exited"},
		{"nothing", "\n \n", ""},
	} {
		if got := tellingLine(tc.out); got != tc.want {
			t.Errorf("%s: tellingLine = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStartErrorKeepsTheOutput: a head that does not start at all leaves
// nothing of `ray start` behind but the error, so the error carries its
// output whole, while brief (a retry's warning) carries only its telling
// line.
func TestStartErrorKeepsTheOutput(t *testing.T) {
	out := "line one\nTraceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: Failed to bind to address 127.0.0.1:1\n"
	err := fmt.Errorf("start private ray head: %w", withOutput(fmt.Errorf("%w: ray head exited while starting (exit code 1)", errRetryable), out))
	if !errors.Is(err, errRetryable) {
		t.Errorf("%v: not errRetryable", err)
	}
	if !strings.HasSuffix(err.Error(), "; output:\n"+out) {
		t.Errorf("error %q lacks the whole output", err)
	}
	const want = `ray head failed to start: ray head exited while starting (exit code 1); ray start said "RuntimeError: Failed to bind to address 127.0.0.1:1"`
	if got := brief(err); got != want {
		t.Errorf("brief = %q, want %q", got, want)
	}
}

// TestStartRestartsARayStartThatTimedOut: `ray start` says its raylet
// timed out and has not exited yet: the head is started again at once,
// and the warning does not claim Ray went on without part of the head
// (it said no "Ray runtime started.").
func TestStartRestartsARayStartThatTimedOut(t *testing.T) {
	firstTry := `  echo 'Exception: The current node timed out during startup.' >&2
  exec sleep 3600
`
	warnings := startFailingOnce(t, firstTry, Options{ReadyTimeout: time.Hour})
	const want = "ray head did not start (attempt 1 of 3); starting it again: ray head failed to start: " +
		"`ray start` failed to start the head; ray start said \"Exception: The current node timed out during startup.\""
	if len(warnings) != 1 || warnings[0] != want {
		t.Errorf("warnings %q,\nwant [%q]", warnings, want)
	}
}
