// Package fakeray writes a stand-in for the ray executable, for tests of
// the head launcher (rayhead) and of what runs on it (runner/local) that
// need a head's processes but not Ray.
//
// The stand-in starts the two kinds of process a process-group kill
// misses: one in a session of its own (as Ray's job supervisor starts a
// driver) and one orphaned by its parent (as a dying worker leaves its
// children). Their pids go to the files session.pid and orphan.pid in the
// stand-in's dir, written before its "dashboard" (a static file server on
// --dashboard-port that answers GET /api/version, and another on
// --ray-client-server-port) listens, and it says it started as `ray start`
// does. None of them mentions the head's temp dir.
package fakeray

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// New writes the stand-in into a fresh test dir and returns its path and
// the dir that receives its pid files.
func New(t testing.TB) (rayBin, dir string) {
	t.Helper()
	dir = t.TempDir()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("fake ray needs python3: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "www", "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "www", "api", "version"), []byte(`{"ray_version": "2.60.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
dir='` + dir + `'
for a; do case $a in --dashboard-port=*) port=${a#*=};; --ray-client-server-port=*) client=${a#*=};; esac; done
setsid sleep 600 &
echo $! > "$dir/session.pid"
(sleep 600 & echo $! > "$dir/orphan.pid")
cd "$dir/www"
if [ -n "$client" ]; then ` + python + ` -m http.server --bind 127.0.0.1 "$client" >/dev/null 2>&1 & fi
echo 'Ray runtime started.'
exec ` + python + ` -m http.server --bind 127.0.0.1 "$port"
`
	rayBin = filepath.Join(dir, "ray")
	if err := os.WriteFile(rayBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return rayBin, dir
}
