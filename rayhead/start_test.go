package rayhead

import (
	"strconv"
	"strings"
	"testing"
)

func TestRetryableStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, out string
		want      bool
	}{
		{"port taken", "OSError: [Errno 98] Address already in use", true},
		{"bind failed", "Failed to bind to address 127.0.0.1:41234", true},
		{"dashboard's port taken", "ERROR services.py:1500 -- Failed to bind to 127.0.0.1:39689 because it's already occupied.", true},
		{"raylet registered too late", "Exception: The current node timed out during startup. This could happen because", true},
		{"bad flag", "Error: No such option: --bogus", false},
		{"nothing", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retryableStart(tt.out); got != tt.want {
				t.Errorf("retryableStart(%q) = %v, want %v", tt.out, got, tt.want)
			}
		})
	}
}

// TestStartArgsReserveOnlyThePortsRaystepDials: raystep reserves (and
// so releases before Ray binds it) only the ports it must know, the GCS,
// the dashboard and the Ray Client server. Every other listener binds a
// port Ray chooses when it starts: the dashboard agent binds last, and a
// released port that another process took meanwhile left it without its
// HTTP server, so the head never took a job.
func TestStartArgsReserveOnlyThePortsRaystepDials(t *testing.T) {
	t.Parallel()
	h := &Head{host: "127.0.0.1", tempDir: t.TempDir()}
	args, err := h.startArgs(Options{})
	if err != nil {
		t.Fatal(err)
	}
	reserved := map[string]int{"--port": h.gcsPort, "--dashboard-port": h.dashPort, "--ray-client-server-port": h.clientPort}
	seen := map[string]bool{}
	for _, a := range args {
		flag, value, ok := strings.Cut(a, "=")
		if !ok || !strings.HasSuffix(flag, "-port") {
			continue
		}
		seen[flag] = true
		want, isReserved := reserved[flag]
		switch {
		case isReserved && (want == 0 || value != strconv.Itoa(want)):
			t.Errorf("%s: want the reserved port %d", a, want)
		case !isReserved && value != "0":
			t.Errorf("%s: want 0, a port Ray binds itself", a)
		}
	}
	for flag := range reserved {
		if !seen[flag] {
			t.Errorf("no %s in %q", flag, args)
		}
	}
	if !seen["--dashboard-agent-listen-port"] {
		t.Errorf("no --dashboard-agent-listen-port=0 in %q: Ray's default is the fixed port 52365", args)
	}
}
