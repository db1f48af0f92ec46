package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

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
