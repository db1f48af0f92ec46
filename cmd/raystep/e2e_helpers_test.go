package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sethvargo/go-envconfig"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/internal/quickstart"
	"github.com/raystep/raystep/test/raytest"
)

// The end-to-end tests run raystep against real Ray heads: a shared one for
// RAY_ADDRESS runs, private ones that raystep starts itself. Pipes runs get
// the bootstrap Dagster's subprocess client would give: the context inline
// and messages appended to a file.

var ray raytest.Shared

// TestMain also makes this test binary the raystep command of the
// testscript scripts (script_test.go).
func TestMain(m *testing.M) {
	quickstart.Done() // as main does
	testscript.Main(stopRayAfter{m}, map[string]func(){"raystep": main})
}

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

// runRay runs raystep in-process with env as its environment (plus
// RAYSTEP_RAY_BIN, the tests' ray) and returns its exit code and output.
func runRay(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	full := map[string]string{"RAYSTEP_RAY_BIN": raytest.RayBin(t)}
	for k, v := range env {
		full[k] = v
	}
	var out, errOut syncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, lookup: envconfig.MapLookuper(full)}
	code := a.main(context.Background(), args)
	return code, out.String(), errOut.String()
}

// rayWrapper writes an executable that records each invocation (its pid
// and arguments, one line each) in a log and then runs the tests' ray,
// with ray's own directory first on PATH so that the driver's python is
// the one Ray runs on. The pid of `ray start` is the head's process group.
func rayWrapper(t *testing.T) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "ray"), filepath.Join(dir, "invocations")
	real := raytest.RayBin(t)
	script := "#!/bin/sh\necho \"$$ $*\" >> " + log + "\nPATH=" + filepath.Dir(real) + ":$PATH exec " + real + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// raystep runs the head's keeper with a python beside ray.
	if err := os.Symlink(filepath.Join(filepath.Dir(real), "python3"), filepath.Join(dir, "python3")); err != nil {
		t.Fatal(err)
	}
	return bin, log
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
