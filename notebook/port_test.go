package notebook

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
)

// TestLoopbackPort: a notebook's port is free on 127.0.0.1 when chosen
// and lies where neither a bind to port 0 nor an outgoing connection
// takes one (above Ray's worker ports, below the ephemeral range), so it
// is still free when the server binds it, minutes or hours later.
func TestLoopbackPort(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral port range to compare with: %v", err)
	}
	var low int
	if _, err := fmt.Sscan(string(b), &low); err != nil || low <= minLoopbackPort+1 {
		t.Skipf("ip_local_port_range %q leaves no room below it", b)
	}
	for range 20 {
		port, err := LoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		if port < minLoopbackPort || port >= low {
			t.Errorf("port %d, want one in [%d, %d)", port, minLoopbackPort, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Errorf("port %d is not free: %v", port, err)
			continue
		}
		l.Close()
	}
}
