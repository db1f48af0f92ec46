package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/raystep/raystep/history"
	"github.com/raystep/raystep/test/s3test"
)

// runInState runs raystep in-process with XDG_STATE_HOME at state.
func runInState(t *testing.T, state string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		lookup: envconfig.MapLookuper(map[string]string{"XDG_STATE_HOME": state})}
	code := a.main(context.Background(), args)
	return code, out.String(), errOut.String()
}

// TestLsFinishedAndLogs: ls --finished lists the steps this machine's
// history holds, the latest first with how each ended, --since keeps the
// recent ones, and logs prints a step's driver log as kept; bad names and
// unknown steps are usage errors.
func TestLsFinishedAndLogs(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := history.Dir{Root: filepath.Join(state, "raystep", "history")}
	now := time.Now()
	for _, r := range []history.Record{
		{Name: "raystep-train-old", Spec: "train", Backend: "kuberay", ExitCode: 0, Reason: history.Succeeded,
			Started: now.Add(-50 * time.Hour), Ended: now.Add(-49 * time.Hour)},
		{Name: "raystep-train-new", Spec: "train", Owner: "alice", Backend: "local", ExitCode: 143, Reason: "cancelled (SIGTERM)",
			Status: "STOPPED", Started: now.Add(-2 * time.Hour), Ended: now.Add(-time.Hour)},
	} {
		if err := dir.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	w, err := dir.NewLogWriter("raystep-train-new", history.DefaultLogCap)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("epoch 1/3\nno newline at the end"))
	w.Close()

	code, out, errOut := runInState(t, state, "ls", "--finished")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "raystep-train-new ") ||
		!strings.Contains(lines[1], "cancelled (SIGTERM), job STOPPED") || !strings.Contains(lines[1], " 143 ") ||
		!strings.HasPrefix(lines[2], "raystep-train-old ") {
		t.Errorf("ls --finished: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runInState(t, state, "ls", "--finished", "--since", "24h", "-o", "json")
	var recs []history.Record
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 1 || recs[0].Name != "raystep-train-new" {
		t.Errorf("ls --finished --since 24h -o json: exit %d, %v\n%s", code, err, out)
	}
	if code, out, errOut = runInState(t, state, "logs", "raystep-train-new"); code != 0 || out != "epoch 1/3\nno newline at the end" {
		t.Errorf("logs: exit %d, %q %s", code, out, errOut)
	}
	for _, args := range [][]string{{"logs", "../../etc/passwd"}, {"logs", "raystep-never-ran"}, {"ls", "--since", "1h"},
		{"ls", "--finished", "-A"}, {"ls", "--finished", "--since", "-1h"}} {
		if code, out, errOut := runInState(t, state, args...); code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, want 2 and nothing on stdout\n%s%s", args, code, out, errOut)
		}
	}
}

// TestEndReason: the record's words for each way a step ends.
func TestEndReason(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]string{exitOK: "succeeded", exitJobFailed: "failed", exitSIGTERM: "cancelled (SIGTERM)",
		exitSIGINT: "cancelled (SIGINT)", exitSIGHUP: "cancelled (SIGHUP)", exitInfrastructure: "infrastructure", exitUsage: "invalid"} {
		if got := endReason(nil, code); got != want {
			t.Errorf("endReason(exit %d) = %q, want %q", code, got, want)
		}
	}
}

// TestGCTrimsHistory: gc removes the history of steps that ended longer
// ago than --keep-history and keeps the rest; --dry-run removes nothing.
func TestGCTrimsHistory(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := history.Dir{Root: filepath.Join(state, "raystep", "history")}
	now := time.Now()
	for name, ended := range map[string]time.Time{"raystep-old": now.Add(-40 * 24 * time.Hour), "raystep-new": now.Add(-time.Hour)} {
		if err := dir.Put(history.Record{Name: name, Backend: "local", Reason: history.Succeeded, Started: ended, Ended: ended}); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := runInState(t, state, "gc", "--dry-run"); code != 0 || strings.Contains(out, "history") {
		t.Fatalf("gc --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runInState(t, state, "gc")
	if code != 0 || !strings.Contains(out, "history raystep-old: removed (ended more than 720h0m0s ago)") || strings.Contains(out, "raystep-new") {
		t.Fatalf("gc: exit %d\n%s%s", code, out, errOut)
	}
	recs, _ := dir.List(time.Time{})
	if len(recs) != 1 || recs[0].Name != "raystep-new" {
		t.Errorf("after gc the history holds %v, want raystep-new only", recs)
	}
}

// TestLogsFollowsARunningStep: logs -f prints what a running step's log
// holds, then what it adds, and returns once the step's record is written.
func TestLogsFollowsARunningStep(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := history.Dir{Root: filepath.Join(state, "raystep", "history")}
	w, err := dir.NewLogWriter("raystep-running", history.DefaultLogCap)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("first\n"))
	var out syncWriter
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard,
		lookup: envconfig.MapLookuper(map[string]string{"XDG_STATE_HOME": state})}
	done := make(chan int, 1)
	go func() { done <- a.main(context.Background(), []string{"logs", "-f", "raystep-running"}) }()
	out.waitFor(t, "first\n")
	_, _ = w.Write([]byte("second\n"))
	out.waitFor(t, "first\nsecond\n")
	_, _ = w.Write([]byte("last, written just before the record"))
	w.Close()
	if err := dir.Put(history.Record{Name: "raystep-running", Backend: "local", Reason: history.Succeeded}); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if want := "first\nsecond\nlast, written just before the record"; code != 0 || out.String() != want {
			t.Errorf("logs -f: exit %d, %q, want %q", code, out.String(), want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("logs -f did not return within a minute of the step's record; printed %q", out.String())
	}
}

// syncWriter is a buffer a command writes while the test reads it.
type syncWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.buf.Write(p)
}

func (s *syncWriter) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.buf.String() }

// waitFor waits until the buffer holds want.
func (s *syncWriter) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		s.mu.Lock()
		got := s.buf.String()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("output %q, want %q within a minute", got, want)
		}
	}
}

// TestFinishedTableShowsAnUnknownExitCode: a reaped step's exit code is
// not known, and the table says so with "-", not -1.
func TestFinishedTableShowsAnUnknownExitCode(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var out bytes.Buffer
	finishedTable(&out, []history.Record{{Name: "raystep-killed", Spec: "train", Backend: "local", ExitCode: -1,
		Reason: history.Reaped, Started: now.Add(-time.Hour), Ended: now.Add(-time.Minute)}}, now)
	fields := strings.Fields(strings.Split(out.String(), "\n")[1])
	if len(fields) < 10 || fields[7] != "-" || strings.Join(fields[8:], " ") != "reaped by gc" { // ENDED is "1m ago"
		t.Errorf("table row %q, want exit - and reaped by gc", fields)
	}
}

// TestGCTrimsByTheProfile: the profile's history.keep is gc's default,
// and gc trims the profile's store as well as this machine's history.
func TestGCTrimsByTheProfile(t *testing.T) {
	t.Parallel()
	state, store := t.TempDir(), t.TempDir()
	profile := s3test.Profile(t, "../../examples/platform.yaml", "url: file://"+store, "keep: 24h")
	local := history.Dir{Root: filepath.Join(state, "raystep", "history")}
	remote, err := history.OpenRemote(context.Background(), "file://"+store)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	now := time.Now()
	for name, ended := range map[string]time.Time{"raystep-here-old": now.Add(-30 * time.Hour), "raystep-here-new": now.Add(-time.Hour)} {
		if err := local.Put(history.Record{Name: name, Backend: "local", Reason: history.Succeeded, Started: ended, Ended: ended}); err != nil {
			t.Fatal(err)
		}
	}
	for name, ended := range map[string]time.Time{"raystep-pod-old": now.Add(-30 * time.Hour), "raystep-pod-new": now.Add(-time.Hour)} {
		if err := remote.Put(context.Background(), history.Record{Name: name, Backend: "kuberay", Reason: history.Failed, Started: ended, Ended: ended}, ""); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runInState(t, state, "--profile", profile, "ls", "--finished", "-o", "json")
	var recs []history.Record
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 4 {
		t.Fatalf("ls --finished with the profile's store: exit %d, %v, %d records\n%s%s", code, err, len(recs), out, errOut)
	}
	code, out, errOut = runInState(t, state, "--profile", profile, "gc")
	if code != 0 || !strings.Contains(out, "history raystep-here-old: removed (ended more than 24h0m0s ago)") ||
		!strings.Contains(out, "history raystep-pod-old: removed") || strings.Contains(out, "-new") {
		t.Fatalf("gc with history.keep 24h: exit %d\n%s%s", code, out, errOut)
	}
	left, errs := history.NewIndex(&local, remote).List(context.Background(), time.Time{})
	if len(errs) != 0 || len(left) != 2 {
		t.Errorf("after gc: %v, %v; want the two new ones", left, errs)
	}
}

// TestHistorySettingsRefused: a profile's bad history URL or keep, and a
// bad --ui-url, are usage errors naming what was expected, before
// anything runs.
func TestHistorySettingsRefused(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{[]string{"url: gs://bucket/p"}, "/spec/history/url"},
		{[]string{"url: s3://key:secret@bucket/p"}, "credentials do not belong in the URL"},
		{[]string{"keep: forever"}, "/spec/history/keep"},
	} {
		profile := s3test.Profile(t, "../../examples/platform.yaml", tc.lines...)
		code, _, errOut := runInState(t, state, "--profile", profile, "ls", "--finished")
		if code != exitUsage || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, profile) || strings.Contains(errOut, "secret@") {
			t.Errorf("profile with %v: exit %d, want %d and an error naming %q and the file\n%s", tc.lines, code, exitUsage, tc.want, errOut)
		}
	}
	for _, bad := range []string{"javascript:alert(1)", "raystep.example.com", "https://user:pw@raystep.example.com/"} {
		code, _, errOut := runInState(t, state, "run", "-f", "../../examples/ads_ranking/train.yaml", "--ui-url", bad)
		if code != exitUsage || !strings.Contains(errOut, "--ui-url") || strings.Contains(errOut, ":pw@") {
			t.Errorf("run --ui-url %q: exit %d, want %d\n%s", bad, code, exitUsage, errOut)
		}
	}
}

// TestHistoryPage: the step's page in the UI's History view, under the
// UI's own path, without its query.
func TestHistoryPage(t *testing.T) {
	for base, want := range map[string]string{
		"https://raystep.example.com":           "https://raystep.example.com/history/raystep-x-1/",
		"https://raystep.example.com/ml/?tab=1": "https://raystep.example.com/ml/history/raystep-x-1/",
		"":                                      "",
	} {
		if got := historyPage(base, "raystep-x-1"); got != want {
			t.Errorf("historyPage(%q) = %q, want %q", base, got, want)
		}
	}
}
