package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/test/raytest"
	"github.com/raystep/raystep/test/syncbuf"
)

// The end-to-end tests run the raystep binary, built once for the package
// (with the race detector when the tests are), against real Ray heads: the
// session's shared ones for RAY_ADDRESS runs (test/raytest), private ones
// that raystep starts itself where a head's own lifecycle is what a test
// proves. Pipes runs get the bootstrap Dagster's subprocess client would
// give: the context inline and messages appended to a file.

var (
	ray      raytest.Shared
	tokenRay = raytest.Shared{Options: rayhead.Options{TokenAuth: true}}
)

// raystepBin is the binary under test, built by TestMain.
var raystepBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "raystep-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	raystepBin = filepath.Join(dir, "raystep")
	// The steps' history (and any other state) stays out of $HOME; tests
	// that look at a state dir give their own.
	if err := os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The tests run without the race detector (make test: the Go code
	// here is harness), the binary they drive with it: its signal
	// handling, relay and teardown goroutines meet real Ray only here.
	if out, err := exec.Command("go", "build", "-race", "-o", raystepBin, "../../cmd/raystep").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build raystep: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	ray.Stop()
	tokenRay.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Exit codes from DESIGN.md's table: what raystep's callers see.
const (
	exitOK             = 0
	exitJobFailed      = 1
	exitUsage          = 2
	exitInfrastructure = 3
	exitSIGHUP         = 129
	exitSIGINT         = 130
	exitSIGTERM        = 143
)

// Example specs, as the tests run them.
const (
	train    = "../../examples/ads_ranking/train.yaml"
	eval     = "../../examples/ads_ranking/eval.yaml"
	platform = "../../examples/platform.yaml"
)

// message is one Pipes message raystep wrote.
type message struct {
	Method string         `json:"method"`
	Params map[string]any `json:"params"`
}

// pipesEnv returns the environment that bootstraps a Pipes session with
// data, and the messages file.
func pipesEnv(t *testing.T, data pipes.ContextData) (map[string]string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "messages")
	env, err := pipes.BootstrapEnv(pipes.ContextDataParams(data), pipes.FileMessagesParams(path))
	if err != nil {
		t.Fatal(err)
	}
	return env, path
}

// readMessages parses the messages file; a malformed line fails the test.
func readMessages(t *testing.T, path string) []message {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("messages file: %v", err)
	}
	defer f.Close()
	var out []message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("messages file line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// methods lists the messages' methods in order.
func methods(ms []message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Method
	}
	return out
}

// only returns the messages with method.
func only(ms []message, method string) []message {
	var out []message
	for _, m := range ms {
		if m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

// metaValue returns the raw_value and type of a metadata entry.
func metaValue(t *testing.T, meta map[string]any, key string) (any, string) {
	t.Helper()
	v, ok := meta[key].(map[string]any)
	if !ok {
		t.Fatalf("metadata has no %q: %v", key, meta)
	}
	typ, _ := v["type"].(string)
	return v["raw_value"], typ
}

// syncBuffer is safe for a writer and a reader at once.
type syncBuffer = syncbuf.Buffer

// runRay runs the raystep binary with env on top of childEnv (plus
// RAYSTEP_RAY_BIN, the tests' ray, unless env sets it) and returns its
// exit code and output.
func runRay(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	full := map[string]string{"RAYSTEP_RAY_BIN": raytest.RayBin(t)}
	for k, v := range env {
		full[k] = v
	}
	extra := make([]string, 0, len(full))
	for k, v := range full {
		extra = append(extra, k+"="+v)
	}
	cmd := exec.Command(raystepBin, args...)
	cmd.Env = childEnv(extra...)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatalf("run raystep: %v", err)
	}
	return 0, out.String(), errOut.String()
}

// rayWrapper is a ray that logs each invocation: see raytest.Wrapper.
func rayWrapper(t *testing.T) (bin, log string) {
	t.Helper()
	return raytest.Wrapper(t)
}

// processesMentioning returns the pids whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && e.Name() != "self" && strings.Contains(string(cmdline), s) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
