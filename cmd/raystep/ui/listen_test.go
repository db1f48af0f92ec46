package ui

import (
	"net"
	"testing"
)

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
