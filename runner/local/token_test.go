package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/raystep/raystep/fleet"
)

// TestTokenSources checks where an existing cluster's token is found: raystep's
// own variable first, then Ray's sources in Ray's order.
func TestTokenSources(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ray"), 0o700); err != nil {
		t.Fatal(err)
	}
	homeFile := filepath.Join(home, ".ray", "auth_token")
	pathFile := filepath.Join(t.TempDir(), "token")
	empty := filepath.Join(t.TempDir(), "empty")
	for file, content := range map[string]string{homeFile: "from-home\n", pathFile: "  from-path \nsecond line\n", empty: "\n"} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name            string
		env             map[string]string
		wantToken, from string
		wantUsage       bool
	}{
		{name: "raystep's variable wins", env: map[string]string{"RAYSTEP_DASHBOARD_TOKEN": "rs", "RAY_AUTH_TOKEN": "ray", "HOME": home}, wantToken: "rs", from: "RAYSTEP_DASHBOARD_TOKEN"},
		{name: "RAY_AUTH_TOKEN before the path", env: map[string]string{"RAY_AUTH_TOKEN": " ray ", "RAY_AUTH_TOKEN_PATH": pathFile}, wantToken: "ray", from: "RAY_AUTH_TOKEN"},
		{name: "RAY_AUTH_TOKEN_PATH before home", env: map[string]string{"RAY_AUTH_TOKEN_PATH": pathFile, "HOME": home}, wantToken: "from-path", from: "RAY_AUTH_TOKEN_PATH=" + pathFile},
		{name: "home", env: map[string]string{"HOME": home}, wantToken: "from-home", from: homeFile},
		{name: "no token anywhere", env: map[string]string{"HOME": t.TempDir()}},
		{name: "RAY_AUTH_TOKEN_PATH missing", env: map[string]string{"RAY_AUTH_TOKEN_PATH": missing, "HOME": home}, wantUsage: true},
		{name: "RAY_AUTH_TOKEN_PATH empty", env: map[string]string{"RAY_AUTH_TOKEN_PATH": empty, "HOME": home}, wantUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := tt.env
			token, from, err := TokenSources{Raystep: e["RAYSTEP_DASHBOARD_TOKEN"], Env: e["RAY_AUTH_TOKEN"], Path: e["RAY_AUTH_TOKEN_PATH"], Home: e["HOME"]}.Find()
			if got := errors.Is(err, fleet.ErrUsage); got != tt.wantUsage {
				t.Fatalf("Find error = %v, want a usage error: %v", err, tt.wantUsage)
			}
			if diff := cmp.Diff([]string{tt.wantToken, tt.from}, []string{token, from}); diff != "" {
				t.Errorf("token and source (-want +got):\n%s", diff)
			}
		})
	}
}
