package rayhead

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rayletThatSays writes a stand-in raylet that writes said to its stderr
// and exits 1, and returns the shell lines with which a stand-in `ray
// start` runs it as Ray does (a child, its stderr in the session's
// raylet.err) and then waits for a node that never comes up, without
// reaping it.
func rayletThatSays(t *testing.T, said string) string {
	t.Helper()
	raylet := filepath.Join(t.TempDir(), rayletName)
	script := "#!/bin/sh\nprintf '%s\\n' '" + said + "' >&2\nexit 1\n"
	if err := os.WriteFile(raylet, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return `  for a; do case $a in --temp-dir=*) tmp=${a#*=};; esac; done
  mkdir -p "$tmp/session_latest/logs"
  echo 'Local node IP: 127.0.0.1'
  '` + raylet + `' 2> "$tmp/session_latest/logs/raylet.err" &
  exec sleep 600
`
}

// TestStartSaysWhyItsRayletExited: a raylet that exits while `ray start`
// waits for its node ends the attempt at once, and after the third
// attempt Start fails with the raylet's own words: `ray start` would only
// have said, 30 s after each, that the node timed out during startup.
// Neither the stall nor the ready timeout can end these starts within the
// test's bound.
func TestStartSaysWhyItsRayletExited(t *testing.T) {
	said := "[2026-12-07 12:00:00,000 C 4242 4242] (raylet) main.cc:42: Check failed: libcuda.so.1: cannot open shared object file"
	dir := t.TempDir()
	attempts := filepath.Join(dir, "attempts")
	rayBin := filepath.Join(dir, "ray")
	script := "#!/bin/sh\necho x >> '" + attempts + "'\n" + rayletThatSays(t, said)
	if err := os.WriteFile(rayBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warnings []string
	opts := Options{RayBin: rayBin, ReadyTimeout: time.Hour, stall: time.Hour, StopTimeout: time.Second,
		tempRoot: t.TempDir(), Warn: func(msg string) { mu.Lock(); defer mu.Unlock(); warnings = append(warnings, msg) }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	h, err := Start(ctx, opts)
	if err == nil {
		_ = h.Stop(context.Background())
		t.Fatal("Start succeeded with a raylet that exited")
	}
	if !strings.Contains(err.Error(), "its raylet (pid ") || !strings.Contains(err.Error(), "exited with code 1") ||
		!strings.Contains(err.Error(), "What raylet.err says:\n    "+said) {
		t.Errorf("Start error %q, want it to say the raylet exited, in its own words", err)
	}
	data, _ := os.ReadFile(attempts)
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(string(data), "x"); n != 3 || len(warnings) != 2 {
		t.Errorf("%d attempts, warnings %q: want 3 attempts, 2 warnings", n, warnings)
	}
}

// TestStartRestartsAHeadWhoseRayletExited: a raylet that exited once
// (an agent it fate-shares with lost its port, on a busy machine) is
// started again, and Warn is told why.
func TestStartRestartsAHeadWhoseRayletExited(t *testing.T) {
	warnings := startFailingOnce(t,
		rayletThatSays(t, "[2026-12-07 12:00:00,000 C 4242 4242] (raylet) agent_manager.cc:121: The raylet exited immediately because one Ray agent failed"),
		Options{ReadyTimeout: time.Hour, stall: time.Hour})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "its raylet (pid ") || !strings.Contains(warnings[0], "attempt 1 of 3") {
		t.Errorf("warnings %q, want one that says the raylet exited and the head is started again", warnings)
	}
}

// TestReadStat reads this process's stat, and how a child ended.
func TestReadStat(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil || st.comm == "" || st.state == 'Z' {
		t.Fatalf("readStat(self) = %+v, %v", st, err)
	}
	for _, tt := range []struct {
		status int
		want   string
	}{
		{1 << 8, "exited with code 1"},
		{9, "was killed by signal 9 (killed)"},
		{-1, "exited"},
	} {
		if got := (statInfo{exit: tt.status}).how(); got != tt.want {
			t.Errorf("how(%#x) = %q, want %q", tt.status, got, tt.want)
		}
	}
}

// TestRayletSaid: the raylet's stderr, else its log, from the first error
// on, else the end of its stderr; nothing when it wrote none of that (a
// SIGKILL).
func TestRayletSaid(t *testing.T) {
	out := `[2026-12-07 12:35:29,101 I 4242 4242] (raylet) main.cc:230: Setting cluster ID to: 01
[2026-12-07 12:35:29,102 W 4242 4242] (raylet) main.cc:240: a warning
[2026-12-07 12:35:29,103 C 4242 4242] (raylet) object_manager.cc:99: Check failed: plasma store could not mmap /dev/shm
*** StackTrace Information ***
/ray/raylet(+0xb5a3c4) [0x55d5]
`
	tests := []struct {
		name, err, out, file string
		want                 []string
	}{
		{"stderr from its first error", "noise\n" + out, out, "raylet.err", []string{
			"[2026-12-07 12:35:29,103 C 4242 4242] (raylet) object_manager.cc:99: Check failed: plasma store could not mmap /dev/shm",
			"*** StackTrace Information ***", "/ray/raylet(+0xb5a3c4) [0x55d5]"}},
		{"the end of a stderr without levels", "line 1\n\nline 2\n", out, "raylet.out", []string{
			"[2026-12-07 12:35:29,103 C 4242 4242] (raylet) object_manager.cc:99: Check failed: plasma store could not mmap /dev/shm",
			"*** StackTrace Information ***", "/ray/raylet(+0xb5a3c4) [0x55d5]"}},
		{"stderr only", "line 1\n\nline 2\n", "", "raylet.err", []string{"line 1", "line 2"}},
		{"only state dumps", "", "[2026-12-07 12:35:29,101 I 4242 4242] (raylet) [state-dump] NodeManager:\n", "", nil},
		{"no logs", "", "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range map[string]string{"raylet.err": tt.err, "raylet.out": tt.out} {
				if text != "" {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			file, lines := (&rayletWatch{logs: dir}).said()
			if file != tt.file || !slices.Equal(lines, tt.want) {
				t.Errorf("said %s %q, want %s %q", file, lines, tt.file, tt.want)
			}
		})
	}
}
