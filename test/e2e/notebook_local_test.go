package e2e

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLocalNotebook: on the local backend `up --notebook` starts a Jupyter
// server on the private head, `notebook NAME` prints its URL with its
// token, the server answers with the token and refuses without it, and
// the job Ray shows carries no token (the server reads it from a file); ls
// marks the cluster with a notebook; after `down` the notebook no longer
// answers. (`dashboard NAME`, and `notebook` on a cluster without one,
// are in TestLocalUpLifecycle.)
func TestLocalNotebook(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	e.up(t, "nb", "--ttl", "10m", "--notebook")
	code, out, errOut := e.raystep(t, "notebook", "nb")
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
	if len(notebooks) != 1 || !notebooks["nb"] {
		t.Errorf("ls -o json says notebook %v, want nb with one", notebooks)
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
	// The token is in a file on the head, not in the job Ray shows.
	code, out, errOut = e.raystep(t, "dashboard", "nb")
	_, tokenFile, found := strings.Cut(errOut, "$(cat ")
	tokenFile, _, _ = strings.Cut(tokenFile, ")")
	rayToken, err := os.ReadFile(tokenFile)
	if code != 0 || !found || err != nil {
		t.Fatalf("dashboard nb: exit %d, token file %q (%v)\n%s\n%s", code, tokenFile, err, out, errOut)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSpace(out)+"/api/jobs/raystep-notebook-nb", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(rayToken)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	job, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(job), token) || !strings.Contains(string(job), "JUPYTER_TOKEN_FILE") {
		t.Errorf("the notebook job as the Jobs API shows it (%s) carries its token or lacks JUPYTER_TOKEN_FILE:\n%s", resp.Status, job)
	}
	if code, _, errOut := e.raystep(t, "down", "nb"); code != 0 {
		t.Fatalf("down nb: exit %d %s", code, errOut)
	}
	if got := status(true); got != 0 {
		t.Errorf("after down the notebook still answers (%d)", got)
	}
}
