package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/raysubmit"
)

// TestUIClusterPage runs the built `raystep ui` on the KubeRay test
// environment: an interactive cluster's page lists its head pod, and the
// dashboard proxy serves the real Ray head's /api/version and /api/jobs/
// over a port-forward raystep opened itself, as `raystep dashboard` does.
func TestUIClusterPage(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-uidetail")
	env := interactiveEnv(t)
	const name = "ui-dev"
	mustRaystep(t, env, "up", "-n", ns, "--name", name, "--owner", "nora", "--ttl", "1h")
	downAtCleanup(t, env, ns, name)

	ui := startHolder(t, env, "ui", "-n", ns, "--addr", "127.0.0.1:0")
	base := strings.TrimSuffix(strings.TrimPrefix(ui.url, "raystep ui: "), "/")
	ui.url = base // stop checks that its port is closed
	page := base + "/clusters/" + ns + "/" + name + "/"
	hc := &http.Client{Timeout: time.Minute}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(page)
	if code != http.StatusOK || !strings.Contains(body, name+"-head") || !strings.Contains(body, "<td>head</td>") {
		t.Errorf("GET %s: %d, want 200 and the head pod:\n%s", page, code, body)
	}
	code, body = get(page + "dashboard/api/version")
	var v raysubmit.VersionInfo
	if code != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil || v.RayVersion == "" {
		t.Errorf("GET dashboard/api/version: %d %s; want the real head's version", code, body)
	}
	code, body = get(page + "dashboard/api/jobs/")
	var jobs []raysubmit.JobDetails
	if code != http.StatusOK || json.Unmarshal([]byte(body), &jobs) != nil {
		t.Errorf("GET dashboard/api/jobs/: %d %s; want the real head's job list", code, body)
	}
	ui.stop(t, syscall.SIGTERM)
}
