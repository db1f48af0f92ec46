package raytest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttach: a package takes the session head its file describes once
// it answers, and refuses, saying why, a head that failed to start, died
// (its file says so, or nothing answers) or was never written; never a
// hang.
func TestAttach(t *testing.T) {
	t.Parallel()
	dash := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/version" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"ray_version": "2.60.0"}`))
	}))
	t.Cleanup(dash.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		body    string // "" writes no file
		token   bool
		wantErr string
	}{
		{"ready, token auth", "dashboard=" + dash.URL + "\ngcs=127.0.0.1:1\ntemp-dir=/tmp/x\ntoken-file=" + tokenFile + "\n", true, ""},
		{"failed to start", "error=ray head exited while starting\n", false, "is unusable: ray head exited while starting"},
		{"died mid-run", "error=the session head died mid-run\n", true, "is unusable: the session head died mid-run"},
		{"nothing answers", "dashboard=" + closed + "\ngcs=127.0.0.1:1\n", false, "does not answer"},
		{"the wrong token", "dashboard=" + dash.URL + "\ngcs=127.0.0.1:1\n", false, "401"},
		{"a plain head's file for the token head", "dashboard=" + dash.URL + "\ngcs=127.0.0.1:1\n", true, "lacks dashboard="},
		{"never written", "", false, "was not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "head")
			if tt.body != "" {
				if err := os.WriteFile(file, []byte(tt.body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			h, err := attach(ctx, file, tt.token, 3*time.Second)
			if tt.wantErr == "" {
				if err != nil || h.DashboardURL() != dash.URL || h.Token() != "tok" || h.TokenFile() != tokenFile {
					t.Fatalf("attach = %+v, %v; want the head with its token", h, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), file) {
				t.Errorf("attach error = %v, want one naming %s and saying %q", err, file, tt.wantErr)
			}
		})
	}
}
