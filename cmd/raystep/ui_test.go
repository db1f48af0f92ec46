package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"
)

// TestUIRefusesExposedAddr: a non-loopback --addr without auth, or with
// only a header any client can send, is a usage error, refused before
// anything connects or listens; so are bad --public-url and
// --trusted-proxy values.
func TestUIRefusesExposedAddr(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, "--auth-token-file"},
		{[]string{"--addr", "0.0.0.0:0", "--auth-proxy-header", "X-Forwarded-User"}, "--trusted-proxy"},
		{[]string{"--addr", "0.0.0.0:0", "--auth-proxy-header", "X-Forwarded-User", "--trusted-proxy", "10.0.0.0/99"}, "--trusted-proxy \"10.0.0.0/99\""},
		{[]string{"--trusted-proxy", "10.0.0.0/8"}, "--auth-proxy-header"},
		{[]string{"--public-url", "raystep.example.com"}, "--public-url \"raystep.example.com\""},
		{[]string{"--addr", "127.0.0.1:99999"}, "--addr \"127.0.0.1:99999\": want a port from 0 to 65535"},
		{[]string{"--addr", "127.0.0.1:-1"}, "--addr \"127.0.0.1:-1\": want a port"},
		{[]string{"--addr", "127.0.0.1"}, "--addr \"127.0.0.1\": want HOST:PORT"},
	} {
		var stdout, stderr bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, lookup: envconfig.MapLookuper(map[string]string{})}
		if code := a.main(context.Background(), append([]string{"ui"}, tt.args...)); code != exitUsage {
			t.Fatalf("ui %v: exit %d, want %d; stderr:\n%s", tt.args, code, exitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("ui %v: stderr = %q, want it to name %s", tt.args, stderr.String(), tt.want)
		}
	}
}

// TestUISeesLocalClustersRecordedLater: a page started before this
// machine had any local cluster (no state dir yet) shows the first one
// recorded after it, without a restart.
func TestUISeesLocalClustersRecordedLater(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	var stdout, stderr syncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		lookup: envconfig.MapLookuper(map[string]string{"HOME": home})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.main(ctx, []string{"ui", "--addr", "127.0.0.1:0"}) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("ui: exit %d: %s", code, stderr.String())
		}
	}()
	page := regexp.MustCompile(`raystep ui: (http://\S+/)`)
	wait, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	var base string
	for base == "" {
		if m := page.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case <-wait.Done():
			t.Fatalf("ui printed no URL; stderr: %s", stderr.String())
		case <-time.After(20 * time.Millisecond): // the next look at its output
		}
	}
	dir := filepath.Join(home, ".local", "state", "raystep", "clusters")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	record := `{"name": "late", "owner": "bob", "created": "2026-12-01T00:00:00Z", "expires": "2099-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, "late.json"), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := http.Get(base + "api/clusters")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), `"late"`) {
			return
		}
		select {
		case <-wait.Done():
			t.Fatalf("the page never showed local cluster late: %s", body)
		case <-time.After(50 * time.Millisecond): // the next look, not a guess at when it shows
		}
	}
}
