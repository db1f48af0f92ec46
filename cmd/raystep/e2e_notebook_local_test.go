package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestLocalNotebookAndDashboard: on the local backend `up --notebook`
// starts a Jupyter server on the private head, `notebook NAME` prints its
// URL with its token, the server answers with the token and refuses
// without it, `dashboard NAME` prints the head's dashboard; `notebook` on
// a cluster without one, and KubeRay's flags, are exit 2; after `down`
// the notebook no longer answers. ls marks the cluster with a notebook.
func TestLocalNotebookAndDashboard(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	rec := e.up(t, "plain", "--ttl", "10m")
	if code, _, errOut := e.raystep(t, "notebook", "plain"); code != 2 || !strings.Contains(errOut, "raystep up --notebook --name plain") {
		t.Errorf("notebook on a cluster without one: exit %d %q, want 2 and the up --notebook hint", code, errOut)
	}
	code, out, errOut := e.raystep(t, "dashboard", "plain")
	if code != 0 || strings.TrimSpace(out) != rec.DashboardURL || !strings.Contains(errOut, "RAY_AUTH_TOKEN=$(cat ") {
		t.Errorf("dashboard plain: exit %d, stdout %q (want %s), stderr %q", code, out, rec.DashboardURL, errOut)
	}
	for _, args := range [][]string{{"dashboard", "nope"}, {"notebook", "Bad_Name"}, {"dashboard", "plain", "--port", "9000"}} {
		if code, _, errOut := e.raystep(t, args...); code != 2 {
			t.Errorf("raystep %s: exit %d %q, want 2", strings.Join(args, " "), code, errOut)
		}
	}

	e.up(t, "nb", "--ttl", "10m", "--notebook")
	code, out, errOut = e.raystep(t, "notebook", "nb")
	if code != 0 {
		t.Fatalf("notebook nb: exit %d\n%s\n%s", code, out, errOut)
	}
	nb, err := url.Parse(strings.TrimSpace(out))
	if err != nil || nb.Hostname() != "127.0.0.1" || nb.Query().Get("token") == "" || nb.Path != "/lab" {
		t.Fatalf("notebook printed %q, want http://127.0.0.1:PORT/lab?token=...", out)
	}
	token := nb.Query().Get("token")
	notebooks := map[string]bool{}
	for _, r := range e.ls(t) {
		notebooks[r.Name] = r.Notebook
	}
	if !notebooks["nb"] || notebooks["plain"] {
		t.Errorf("ls -o json says notebook %v, want nb only", notebooks)
	}
	status := func(withToken bool) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+nb.Host+"/api/status", nil)
		if withToken {
			req.Header.Set("Authorization", "token "+token)
		}
		c := &http.Client{Timeout: time.Minute}
		resp, err := c.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(true); got != http.StatusOK {
		t.Errorf("/api/status with the token: %d, want 200", got)
	}
	if got := status(false); got != http.StatusForbidden && got != http.StatusUnauthorized {
		t.Errorf("/api/status without the token: %d, want 403 or 401", got)
	}
	if code, _, errOut := e.raystep(t, "down", "nb"); code != 0 {
		t.Fatalf("down nb: exit %d %s", code, errOut)
	}
	if got := status(true); got != 0 {
		t.Errorf("after down the notebook still answers (%d)", got)
	}
}
