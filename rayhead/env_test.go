package rayhead

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
