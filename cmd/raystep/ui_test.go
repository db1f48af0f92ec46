package main

import (
	"bytes"
	"context"
	"net"
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

// TestShownAddr: the URL ui prints opens in a browser on this machine,
// also when it listens on every interface.
func TestShownAddr(t *testing.T) {
	for _, tt := range []struct {
		addr *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, "127.0.0.1:9"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9}, "[::1]:9"},
	} {
		if got := shownAddr(tt.addr); got != tt.want {
			t.Errorf("shownAddr(%s) = %s, want %s", tt.addr, got, tt.want)
		}
	}
}
