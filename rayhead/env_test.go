package rayhead

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHeadEnvPutsRaysInterpreterFirstOnPath(t *testing.T) {
	t.Parallel()
	venv := t.TempDir()
	bin := filepath.Join(venv, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!" + filepath.Join(bin, "python3") + "\nimport ray\n"
	if err := os.WriteFile(filepath.Join(bin, "ray"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "ray")
	if err := os.Symlink(filepath.Join(bin, "ray"), elsewhere); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		rayBin string
	}{
		{"ray inside its virtualenv", filepath.Join(bin, "ray")},
		{"ray linked from elsewhere", elsewhere},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := map[string]string{}
			for _, kv := range headEnv(tt.rayBin, []string{"EXTRA=1"}) {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = v
			}
			first, _, _ := strings.Cut(got["PATH"], string(os.PathListSeparator))
			want := map[string]string{"PATH[0]": bin, "VIRTUAL_ENV": venv, "EXTRA": "1", "RAY_USAGE_STATS_ENABLED": "0"}
			gotSome := map[string]string{"PATH[0]": first, "VIRTUAL_ENV": got["VIRTUAL_ENV"], "EXTRA": got["EXTRA"], "RAY_USAGE_STATS_ENABLED": got["RAY_USAGE_STATS_ENABLED"]}
			if diff := cmp.Diff(want, gotSome); diff != "" {
				t.Errorf("head environment (-want +got):\n%s", diff)
			}
			if _, ok := got["RAY_ADDRESS"]; ok {
				t.Errorf("RAY_ADDRESS leaked into a private head's environment")
			}
		})
	}
}

// A busy machine starts Ray's dashboard in more than Ray's own 60 s; the
// head's environment lets Ray wait as long as raystep does, unless the user
// chose a bound.
func TestStartEnvLetsRayWaitForItsDashboardAsLongAsRaystep(t *testing.T) {
	rayBin := filepath.Join(t.TempDir(), "ray")
	if err := os.WriteFile(rayBin, []byte("#!/usr/bin/python3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	envOf := func(opts Options) string {
		t.Helper()
		h := &Head{host: "127.0.0.1", tempDir: t.TempDir()}
		env, err := h.startEnv(rayBin, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, found := "", false
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, dashboardStartupEnv+"="); ok {
				got, found = v, true // the last value is the one exec uses
			}
		}
		if !found {
			return "(unset)"
		}
		return got
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"default ready timeout", Options{}, "240"},
		{"ready timeout rounded up to whole seconds", Options{ReadyTimeout: 4200 * time.Millisecond}, "5"},
		{"Options.Env wins", Options{Env: []string{dashboardStartupEnv + "=7"}}, "7"},
	}
	for _, tt := range tests {
		if got := envOf(tt.opts); got != tt.want {
			t.Errorf("%s: %s = %s, want %s", tt.name, dashboardStartupEnv, got, tt.want)
		}
	}
	t.Setenv(dashboardStartupEnv, "300")
	if got := envOf(Options{}); got != "300" {
		t.Errorf("with %s=300 in raystep's environment, the head gets %s, want 300", dashboardStartupEnv, got)
	}
}

// Ray's Python processes get a TMPDIR inside the head's own temp dir, which
// goes with the head, unless raystep did not make that dir or the user
// chose a TMPDIR.
func TestStartEnvGivesRaysPythonATempDirThatGoesWithTheHead(t *testing.T) {
	rayBin := filepath.Join(t.TempDir(), "ray")
	if err := os.WriteFile(rayBin, []byte("#!/usr/bin/python3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tmpdirOf := func(h *Head) string {
		t.Helper()
		env, err := h.startEnv(rayBin, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := "(unset)"
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
				got = v // the last value is the one exec uses
			}
		}
		return got
	}

	t.Setenv("TMPDIR", "")
	owned := &Head{host: "127.0.0.1", tempDir: t.TempDir(), ownsTempDir: true}
	want := filepath.Join(owned.tempDir, "tmp")
	if got := tmpdirOf(owned); got != want {
		t.Errorf("head in a temp dir of its own: TMPDIR=%s, want %s", got, want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, %v; want a directory with mode 0700", want, fi, err)
	}
	if got := tmpdirOf(owned); got != want {
		t.Errorf("second start in the same dir: TMPDIR=%s, want %s", got, want)
	}

	given := &Head{host: "127.0.0.1", tempDir: t.TempDir()}
	if got := tmpdirOf(given); got != "" && got != "(unset)" {
		t.Errorf("head in a temp dir the caller gave: TMPDIR=%s, want the inherited (empty)", got)
	}

	chosen := t.TempDir()
	t.Setenv("TMPDIR", chosen)
	if got := tmpdirOf(&Head{host: "127.0.0.1", tempDir: t.TempDir(), ownsTempDir: true}); got != chosen {
		t.Errorf("with the user's TMPDIR: TMPDIR=%s, want theirs, %s", got, chosen)
	}
}
