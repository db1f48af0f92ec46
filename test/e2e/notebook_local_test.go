package e2e

import (
	"encoding/json"
	"io"
	"net"
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
// marks the cluster with a notebook; once its job ended and another
// program took its port, `up --notebook` starts it on another port; after
// `down` the notebook no longer answers. (`dashboard NAME`, and `notebook` on a cluster without one,
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
	dashboard := strings.TrimSpace(out)
	ray := func(method, path string) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, dashboard+path, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(rayToken)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s %s", method, path, resp.Status, body)
		}
		return body
	}
	jobs := ray(http.MethodGet, "/api/jobs/")
	var listed []struct {
		SubmissionID string            `json:"submission_id"`
		Status       string            `json:"status"`
		Metadata     map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(jobs, &listed); err != nil || len(listed) != 1 || listed[0].Metadata["raystep.dev/kind"] != "notebook" ||
		listed[0].Metadata["raystep.dev/cluster"] != "nb" {
		t.Fatalf("the head's jobs (%v) are not the notebook's alone, with its metadata:\n%s", err, jobs)
	}
	first := listed[0].SubmissionID
	if strings.Contains(string(jobs), token) || !strings.Contains(string(jobs), "JUPYTER_TOKEN_FILE") {
		t.Errorf("the notebook job as the Jobs API shows it carries its token or lacks JUPYTER_TOKEN_FILE:\n%s", jobs)
	}
	// The notebook's job ends and another program takes its port: up
	// --notebook starts it again, as a new job, on another port, which
	// notebook prints.
	ray(http.MethodPost, "/api/jobs/"+first+"/stop")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		job := ray(http.MethodGet, "/api/jobs/"+first)
		var got struct{ Status string }
		if json.Unmarshal(job, &got) == nil && got.Status == "STOPPED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the notebook job is not stopped 2 minutes after its stop: %s", job)
		}
	}
	squatter := listenWhenFree(t, nb.Host)
	defer squatter.Close()
	code, _, errOut = e.raystep(t, "up", "--name", "nb", "--notebook")
	if code != 0 || !strings.Contains(errOut, "port "+nb.Port()+" is taken by another program: the notebook moves to port") {
		t.Fatalf("up --notebook with its port taken: exit %d, want 0 and a new port:\n%s", code, errOut)
	}
	t.Logf("up --notebook with its port taken:\n%s", errOut)
	code, out, errOut = e.raystep(t, "notebook", "nb")
	moved, err := url.Parse(strings.TrimSpace(out))
	if code != 0 || err != nil || moved.Port() == nb.Port() {
		t.Fatalf("notebook nb after the move: exit %d, %q, want another port than %s\n%s", code, out, nb.Port(), errOut)
	}
	nb, token = moved, moved.Query().Get("token")
	if got := status(true); got != http.StatusOK {
		t.Errorf("/api/status on the new port with the token: %d, want 200", got)
	}
	jobs = ray(http.MethodGet, "/api/jobs/")
	listed = nil
	if err := json.Unmarshal(jobs, &listed); err != nil || len(listed) != 2 {
		t.Fatalf("the head's jobs after the restart (%v), want the stopped notebook job and a new one:\n%s", err, jobs)
	}
	for _, j := range listed {
		if (j.SubmissionID == first) != (j.Status == "STOPPED") || j.Metadata["raystep.dev/kind"] != "notebook" {
			t.Errorf("after the restart, job %s is %s (%v); want %s stopped and a new notebook job running", j.SubmissionID, j.Status, j.Metadata, first)
		}
	}
	if code, _, errOut := e.raystep(t, "down", "nb"); code != 0 {
		t.Fatalf("down nb: exit %d %s", code, errOut)
	}
	if got := status(true); got != 0 {
		t.Errorf("after down the notebook still answers (%d)", got)
	}
}

// listenWhenFree listens on addr once the program that held it let it go,
// as a program that takes a port just freed would.
func listenWhenFree(t *testing.T, addr string) net.Listener {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still taken 2 minutes after its notebook stopped: %v", addr, err)
		}
	}
}
