package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
)

// TestUIRefusesExposedAddr: a non-loopback --addr without auth is a usage
// error, refused before anything connects or listens.
func TestUIRefusesExposedAddr(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, lookup: envconfig.MapLookuper(map[string]string{})}
	if code := a.main(context.Background(), []string{"ui", "--addr", "0.0.0.0:0"}); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
	}
	if !strings.Contains(stderr.String(), "--auth-token-file") {
		t.Errorf("stderr = %q, want it to name --auth-token-file", stderr.String())
	}
}
