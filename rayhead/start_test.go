package rayhead

import (
	"slices"
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

// TestStartArgsLeaveTheAgentsHTTPPortToRay: the dashboard agent's HTTP
// server binds a port of its own choosing (0): it binds last, and a
// reserved port that another process took meanwhile left it without its
// HTTP server, so the head never took a job. Every other listener gets a
// distinct reserved port, so that no Ray process waits on another to learn
// its port; so does the dashboard's Prometheus server, through the
// environment.
func TestStartArgsLeaveTheAgentsHTTPPortToRay(t *testing.T) {
	h := &Head{host: "127.0.0.1", tempDir: t.TempDir()}
	args, err := h.startArgs(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--port", "--dashboard-port", "--ray-client-server-port", "--node-manager-port",
		"--object-manager-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port"}
	got := map[string]string{}
	for _, a := range args {
		if flag, value, ok := strings.Cut(a, "="); ok && strings.HasSuffix(flag, "-port") {
			got[flag] = value
		}
	}
	if got["--dashboard-agent-listen-port"] != "0" {
		t.Errorf("--dashboard-agent-listen-port=%q, want 0 in %q", got["--dashboard-agent-listen-port"], args)
	}
	seen := map[string]bool{}
	for _, flag := range want {
		port, err := strconv.Atoi(got[flag])
		if err != nil || port == 0 || seen[got[flag]] {
			t.Errorf("%s=%q, want a reserved port of its own in %q", flag, got[flag], args)
		}
		seen[got[flag]] = true
	}
	if got["--port"] != strconv.Itoa(h.gcsPort) || got["--dashboard-port"] != strconv.Itoa(h.dashPort) ||
		got["--ray-client-server-port"] != strconv.Itoa(h.clientPort) {
		t.Errorf("the head dials other ports than it passed: %+v", h)
	}
	// The dashboard's Prometheus server, which `ray start` has no flag
	// for, gets a reserved port of its own through the environment, also
	// when the user's environment names one for their own Ray head.
	t.Setenv(dashboardMetricsEnv, "44227")
	env, err := h.startEnv("ray", Options{})
	if err != nil {
		t.Fatal(err)
	}
	metrics := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, dashboardMetricsEnv+"="); ok {
			metrics = v // exec.Cmd uses the last one
		}
	}
	if metrics != strconv.Itoa(h.metricsPort) || h.metricsPort == 0 || seen[metrics] {
		t.Errorf("%s=%q, want a reserved port of its own (the flags have %v)", dashboardMetricsEnv, metrics, got)
	}
}

// TestStartArgsLeaveOutTheMonitor: a head goes without Ray's autoscaler
// monitor unless Options.Monitor asks for it.
func TestStartArgsLeaveOutTheMonitor(t *testing.T) {
	for _, monitor := range []bool{false, true} {
		h := &Head{host: "127.0.0.1", tempDir: t.TempDir()}
		args, err := h.startArgs(Options{Monitor: monitor})
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(args, "--no-monitor"); got == monitor {
			t.Errorf("Monitor %v: --no-monitor in args is %v: %q", monitor, got, args)
		}
	}
}
