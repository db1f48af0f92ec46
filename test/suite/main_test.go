package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/test/fakeray"
)

// The tests run suite around stand-in heads (test/fakeray: a dashboard
// that answers GET /api/version, no Ray) with this test binary as its
// command (helperEnv says what it does), and read what the command saw
// from a file.

const (
	helperEnv = "SUITE_TEST_HELPER" // inspect or kill
	outEnv    = "SUITE_TEST_OUT"    // where the helper writes what it saw
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Getenv(outEnv)))
	}
	os.Exit(m.Run())
}

// helper is the command under suite. inspect writes the heads' files and
// the ray it was given, and exits 3; kill kills the plain head's
// dashboard, waits until its file says the head died, writes that file
// and exits 0.
func helper(mode, out string) int {
	var b bytes.Buffer
	plain, err := awaitFile(os.Getenv("RAYSTEP_TEST_HEAD"), "dashboard=")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "inspect":
		token, err := awaitFile(os.Getenv("RAYSTEP_TEST_TOKEN_HEAD"), "dashboard=")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(&b, "plain:\n%stoken:\n%sray: %s\npath: %s\n", plain, token, os.Getenv("RAYSTEP_RAY_BIN"),
			strings.Split(os.Getenv("PATH"), ":")[0])
		_ = os.WriteFile(out, b.Bytes(), 0o644)
		return 3
	case "kill":
		port := plain[strings.LastIndex(plain[:strings.Index(plain, "\ngcs=")], ":")+1 : strings.Index(plain, "\ngcs=")]
		if !killServer(port) {
			fmt.Fprintln(os.Stderr, "no stand-in dashboard on port", port)
			return 1
		}
		died, err := awaitFile(os.Getenv("RAYSTEP_TEST_HEAD"), "error=")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = os.WriteFile(out, []byte(died), 0o644)
		return 0
	}
	return 1
}

// awaitFile waits until path exists and holds prefix, at most 10 minutes
// (the heads take turns to start with those of other packages).
func awaitFile(path, prefix string) (string, error) {
	deadline := time.Now().Add(10 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		if b, err := os.ReadFile(path); err == nil && strings.HasPrefix(string(b), prefix) {
			return string(b), nil
		}
		if time.Now().After(deadline) {
			break
		}
	}
	return "", fmt.Errorf("%s holds no %s line after 10 minutes", path, prefix)
}

// killServer SIGKILLs the stand-in dashboard listening on port.
func killServer(port string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cmdline, []byte("http.server")) && bytes.HasSuffix(cmdline, []byte("\x00"+port+"\x00")) {
			return syscall.Kill(pid, syscall.SIGKILL) == nil
		}
	}
	return false
}

// runSuite runs suite with this binary in mode as its command and returns
// its exit code, its stderr, what the helper wrote and the events file.
func runSuite(t *testing.T, mode string) (code int, stderr, out, events string) {
	rayBin, _ := fakeray.New(t)
	dir := t.TempDir()
	out, events = dir+"/out", dir+"/events"
	t.Setenv("RAYSTEP_RAY_BIN", rayBin)
	t.Setenv(helperEnv, mode)
	t.Setenv(outEnv, out)
	var errOut bytes.Buffer
	code = run([]string{"-events", events, "--", os.Args[0], "-test.run=^$"}, &errOut)
	b, _ := os.ReadFile(out)
	ev, _ := os.ReadFile(events)
	return code, errOut.String(), string(b), string(ev)
}

// TestSuiteHandsOutItsHeads: the command gets both heads' files (the
// token head's with its token file), the counting ray first on PATH and
// in RAYSTEP_RAY_BIN; suite counts the heads it started through it,
// exits with the command's code and stops both heads.
func TestSuiteHandsOutItsHeads(t *testing.T) {
	code, stderr, out, events := runSuite(t, "inspect")
	if code != 3 {
		t.Fatalf("suite exited %d, want the command's 3\nstderr:\n%s", code, stderr)
	}
	plain, token, _ := strings.Cut(strings.TrimPrefix(out, "plain:\n"), "token:\n")
	for _, want := range []string{"dashboard=http://127.0.0.1:", "gcs=127.0.0.1:", "temp-dir=/tmp/"} {
		if !strings.Contains(plain, want) || !strings.Contains(token, want) {
			t.Errorf("a head's file lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(plain, "token-file=") || !strings.Contains(token, "token-file=") {
		t.Errorf("want a token file for the token head only:\n%s", out)
	}
	ray := between(out, "ray: ", "\n")
	if !strings.HasSuffix(ray, "/bin/ray") || between(out, "path: ", "\n")+"/ray" != ray {
		t.Errorf("the command's ray is %q, want the counting ray, first on PATH:\n%s", ray, out)
	}
	if n := strings.Count(events, "\tray-head\tsession\t"); n != 2 || !strings.Contains(stderr, "2 counted by the counting ray") {
		t.Errorf("%d heads counted, want 2\nevents:\n%s\nstderr:\n%s", n, events, stderr)
	}
	for _, head := range []string{plain, token} {
		url := between(head, "dashboard=", "\n")
		if resp, err := http.Get(url + "/api/version"); err == nil {
			resp.Body.Close()
			t.Errorf("the head at %s still answers after suite exited", url)
		}
	}
}

// TestSuiteSaysWhenAHeadDies: a head that dies mid-run is reported, and
// its file then says so, so that the packages that start later use heads
// of their own (test/raytest's TestAttach reads such a file).
func TestSuiteSaysWhenAHeadDies(t *testing.T) {
	code, stderr, out, _ := runSuite(t, "kill")
	if code != 0 || out != "error=the session head died mid-run\n" {
		t.Fatalf("suite exited %d, the head's file says %q; want 0 and that it died\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "the plain session head died mid-run") {
		t.Errorf("stderr does not say the head died:\n%s", stderr)
	}
}

// between returns what follows from in s up to to.
func between(s, from, to string) string {
	_, after, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(after, to)
	return v
}
