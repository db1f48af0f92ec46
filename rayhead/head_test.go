package rayhead_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/test/raytest"
)

func TestStartHeadServesAndStops(t *testing.T) {
	h := raytest.StartHead(t, rayhead.Options{NumCPUs: 1})
	resp, err := http.Get(h.DashboardURL() + "/api/version")
	if err != nil {
		t.Fatalf("GET /api/version: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"ray_version": "2.`) && !strings.Contains(string(body), `"ray_version":"2.`) {
		t.Errorf("GET /api/version = %s, want a ray 2.x version", body)
	}
	if !strings.HasPrefix(h.Address(), "127.0.0.1:") {
		t.Errorf("Address() = %q, want 127.0.0.1:port", h.Address())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // only catches a hang
	defer cancel()
	// The head takes a job: its dashboard agent, on a port Ray chose,
	// registered with the head (the Jobs API forwards the submit to it).
	jobs, err := raysubmit.New(raysubmit.Config{BaseURL: h.DashboardURL(), Token: h.Token()})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := jobs.Submit(ctx, raysubmit.SubmitRequest{Entrypoint: "true"})
	if err != nil {
		t.Fatalf("submit to the new head: %v", err)
	}
	if job, err := jobs.Wait(ctx, sub.SubmissionID); err != nil || job.Status != raysubmit.StatusSucceeded {
		t.Fatalf("job on the new head: %+v, %v", job, err)
	}
	// The dashboard's Prometheus server serves on a port of this head's,
	// not Ray's fixed default, which a user's own Ray head on this machine
	// (or the head of another step) would otherwise lose to this one.
	if port := dashboardMetricsPort(ctx, t, h); port == defaultDashboardMetricsPort {
		t.Errorf("the dashboard's metrics server is on Ray's fixed port %d", port)
	}
	pgid := h.Pid()
	tmp := h.TempDir()
	// The dashboard's multiprocessing dir (its forkserver serves the Jobs
	// API's module, which took the job above) is in the head's temp dir,
	// removed with it below, not in /tmp, where every head left one.
	if os.Getenv("TMPDIR") == "" {
		if found, _ := filepath.Glob(filepath.Join(tmp, "tmp", "pymp-*")); len(found) == 0 {
			entries, _ := os.ReadDir(filepath.Join(tmp, "tmp"))
			t.Errorf("no pymp-* dir in the head's TMPDIR %s/tmp (holds %v)", tmp, entries)
		}
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		out, _ := exec.Command("ps", "-o", "pid,pgid,stat,cmd", "-g", strconv.Itoa(pgid)).CombinedOutput()
		t.Errorf("process group %d still exists after Stop (kill 0: %v):\n%s", pgid, err, out)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s left behind (stat: %v)", tmp, err)
	}
}

func TestFindRay(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "ray")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		explicit string
		want     string
		wantErr  error
	}{
		{name: "explicit", explicit: fake, want: fake},
		{name: "explicit missing", explicit: filepath.Join(dir, "nope"), wantErr: rayhead.ErrRayNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rayhead.FindRay(tt.explicit)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("FindRay(%q) error = %v, want %v", tt.explicit, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("FindRay(%q) = %q, want %q", tt.explicit, got, tt.want)
			}
		})
	}
}

func TestStartHeadReportsEarlyExit(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "ray")
	script := "#!/bin/sh\necho 'boom: no GCS for you' >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Only catches a hang: the start waits its turn behind the real head
	// starts of the rest of the suite (a start slot is machine-wide), each
	// up to 40 s on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := rayhead.Start(ctx, rayhead.Options{RayBin: fake})
	if err == nil || !strings.Contains(err.Error(), "boom: no GCS for you") {
		t.Fatalf("Start error = %v, want the captured output", err)
	}
}

// defaultDashboardMetricsPort is the port Ray's dashboard serves its
// Prometheus metrics on unless DASHBOARD_METRIC_PORT says otherwise.
const defaultDashboardMetricsPort = 44227

// dashboardMetricsPort waits until h's dashboard says on which port it
// starts its metrics server and that port answers with Prometheus metrics,
// and returns the port.
func dashboardMetricsPort(ctx context.Context, t *testing.T, h *rayhead.Head) int {
	t.Helper()
	logFile := filepath.Join(h.TempDir(), "session_latest", "logs", "dashboard.log")
	starting := regexp.MustCompile(`Starting dashboard metrics server on port (\d+)`)
	for {
		if m := starting.FindSubmatch(readOrEmpty(logFile)); m != nil {
			port, _ := strconv.Atoi(string(m[1]))
			resp, err := http.Get("http://127.0.0.1:" + string(m[1]) + "/metrics")
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "# TYPE") {
					return port
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the dashboard's metrics server did not answer (%s):\n%s", ctx.Err(), readOrEmpty(logFile))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readOrEmpty is the content of file, or nothing while it is not there.
func readOrEmpty(file string) []byte {
	data, _ := os.ReadFile(file)
	return data
}
