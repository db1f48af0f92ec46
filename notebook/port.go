package notebook

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
)

// LoopbackPort returns a port of 127.0.0.1 that nothing listens on now,
// for a notebook server that binds it later: seconds later at its first
// start, hours later when an idle notebook starts again. The port is
// above Ray's default worker ports (10002-19999) and below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, 32768 and up by
// default). Every bind to port 0 and every outgoing connection takes its
// port from that range, and a busy Ray head makes many of both on the
// loopback: a port from there, free when chosen, is soon another
// process's. On a machine with no room below the range, the kernel
// chooses.
func LoopbackPort() (int, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		_, _ = fmt.Sscan(string(b), &low)
	}
	var err error
	for range 100 {
		port := 0
		if low > minLoopbackPort+1 {
			port = minLoopbackPort + mrand.IntN(low-minLoopbackPort)
		}
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			defer l.Close()
			return l.Addr().(*net.TCPAddr).Port, nil
		}
	}
	return 0, fmt.Errorf("find a free port on 127.0.0.1 for the notebook: %w", err)
}

// minLoopbackPort is the lowest port LoopbackPort chooses: above Ray's
// default worker ports.
const minLoopbackPort = 20000
