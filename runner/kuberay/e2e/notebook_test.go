package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/raysubmit"
)

// notebookProfile is the examples' profile with the notebook on the port
// kwok sends to the shared head, as a bare Jupyter Server (it starts
// faster than JupyterLab on a busy machine).
func notebookProfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../examples/platform.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b = fmt.Appendf(b, "  interactive:\n    notebook:\n      port: %d\n      app: server\n", shared.notebookPort)
	path := filepath.Join(t.TempDir(), "platform.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// notebookPort is held by the test whose Jupyter server has the shared
// head's one notebook port: the tests that start one take turns.
var notebookPort sync.Mutex

// takeNotebookPort waits for the notebook port, and when the test ends
// stops and removes the notebook job of cluster from the shared real
// head (which outlives the fake cluster), then lets the next test have
// the port.
func takeNotebookPort(t *testing.T, cluster string) {
	t.Helper()
	ray, err := raysubmit.New(raysubmit.Config{BaseURL: shared.head.DashboardURL()})
	if err != nil {
		t.Fatal(err)
	}
	notebookPort.Lock()
	t.Cleanup(notebookPort.Unlock)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		j, err := (&notebook.Starter{Ray: ray, Cluster: cluster}).Job(ctx)
		if err != nil {
			return
		}
		_, _ = ray.Stop(ctx, j.SubmissionID)
		_, _ = ray.Wait(ctx, j.SubmissionID)
		_, _ = ray.Delete(ctx, j.SubmissionID)
	})
}

// holder is a running `raystep dashboard` or `raystep notebook`.
type holder struct {
	cmd    *exec.Cmd
	url    string
	stderr strings.Builder
}

// downAtCleanup runs `raystep down -n ns name` when t ends, failing t
// when it fails.
func downAtCleanup(t *testing.T, env []string, ns, name string) {
	t.Cleanup(func() { // t.Context() is done by now: no mustRaystep
		down := exec.Command(buildRaystep(t), "down", "-n", ns, name)
		down.Env = env
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("raystep down: %v: %s", err, out)
		}
	})
}

// startHolder runs the built raystep and waits until it printed its
// URL, the first line of its stdout.
func startHolder(t *testing.T, env []string, args ...string) *holder {
	t.Helper()
	h := &holder{cmd: exec.Command(buildRaystep(t), args...)}
	h.cmd.Env = env
	h.cmd.Stderr = &h.stderr
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("raystep %s said on stderr:\n%s", strings.Join(args, " "), h.stderr.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n') // EOF when it exits first
	if err != nil {
		_ = h.cmd.Wait()
		t.Fatalf("raystep %s printed no URL (%v): %s", strings.Join(args, " "), err, h.stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	h.url = strings.TrimSpace(line)
	t.Logf("raystep %s: %s", strings.Join(args, " "), h.url)
	return h
}

// stop sends sig and checks raystep exits 0 and its local port is closed.
func (h *holder) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Wait(); err != nil {
		t.Errorf("after %s: %v, want exit 0: %s", sig, err, h.stderr.String())
	}
	u, err := url.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", u.Host); err == nil {
		c.Close()
		t.Errorf("after %s, %s still accepts connections: the port-forward was left open", sig, u.Host)
	}
}

// TestNotebookAndDashboard: notebook refuses a cluster brought up without
// --notebook; up --notebook on it starts the server; `raystep notebook`
// prints a URL whose server answers with the token and refuses without;
// `raystep dashboard` serves the real Ray dashboard; Ctrl-C and SIGTERM
// end both cleanly with their port-forwards closed.
func TestNotebookAndDashboard(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-notebook")
	env := append(interactiveEnv(t), "RAYSTEP_PROFILE="+notebookProfile(t))
	const name = "nb-dev"
	takeNotebookPort(t, name)
	mustRaystep(t, env, "up", "-n", ns, "--name", name, "--owner", "nora", "--ttl", "1h")
	downAtCleanup(t, env, ns, name)

	o := raystepIn(t, env, "notebook", "-n", ns, name)
	if o.code != 2 || !strings.Contains(o.stderr, "up --notebook") {
		t.Errorf("notebook without one: exit %d, %q; want 2 and a hint at up --notebook", o.code, o.stderr)
	}
	o = mustRaystep(t, env, "up", "-n", ns, "--name", name, "--owner", "nora", "--notebook")
	if !strings.Contains(o.stdout, "raystep notebook "+name) {
		t.Errorf("up --notebook printed %q, want the raystep notebook hint", o.stdout)
	}

	var rows []fleet.Record
	if err := json.Unmarshal([]byte(mustRaystep(t, env, "ls", "-n", ns, "-o", "json").stdout), &rows); err != nil {
		t.Fatalf("ls -o json: %v", err)
	}
	if len(rows) != 1 || !rows[0].Notebook {
		t.Errorf("ls -o json = %+v, want the cluster marked as having a notebook", rows)
	}

	nb := startHolder(t, env, "notebook", "-n", ns, name)
	u, err := url.Parse(nb.url)
	if err != nil {
		t.Fatal(err)
	}
	token := u.Query().Get("token")
	base := u.Scheme + "://" + u.Host
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"with the token", token, http.StatusOK},
		{"without a token", "", http.StatusForbidden},
	} {
		got, err := notebook.Status(t.Context(), hc, base, tc.token)
		if err != nil || got != tc.want {
			t.Errorf("%s: GET %s/api/status = %d, %v; want %d", tc.name, base, got, err, tc.want)
		}
	}
	if token == "" {
		t.Errorf("notebook URL %s has no token", nb.url)
	}
	// The token reached the head in the job's working_dir package: the job
	// as the Jobs API shows it to anyone who reads the cluster's jobs
	// holds no token.
	ray, err := raysubmit.New(raysubmit.Config{BaseURL: shared.head.DashboardURL()})
	if err != nil {
		t.Fatal(err)
	}
	job, err := (&notebook.Starter{Ray: ray, Cluster: name}).Job(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if shown, _ := json.Marshal(job); token != "" && strings.Contains(string(shown), token) {
		t.Errorf("the notebook job as the Jobs API shows it carries its token:\n%s", shown)
	}
	nb.stop(t, syscall.SIGINT)

	d := startHolder(t, env, "dashboard", "-n", ns, name)
	resp, err := hc.Get(d.url + "/api/version")
	if err != nil {
		t.Fatal(err)
	}
	var v raysubmit.VersionInfo
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || v.RayVersion == "" {
		t.Errorf("GET %s/api/version: %d, %+v, %v; want the real dashboard's version", d.url, resp.StatusCode, v, err)
	}
	d.stop(t, syscall.SIGTERM)
}

// TestReachUsage: dashboard and notebook check their arguments before
// looking at Kubernetes, and a name that is no interactive cluster is the
// user's mistake (exit 2), as for down.
func TestReachUsage(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-reach")
	env := interactiveEnv(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"notebook without a name", []string{"notebook"}, "accepts 1 arg"},
		{"dashboard with two names", []string{"dashboard", "a", "b"}, "accepts 1 arg"},
		{"not a cluster name", []string{"notebook", "Not_A_Name"}, "is not a cluster name"},
		{"unknown backend", []string{"dashboard", "--backend", "slurm", "x"}, "want local or kuberay"},
		{"no such cluster", []string{"notebook", "-n", ns, "nosuch"}, "no RayCluster of that name"},
		{"no such cluster's dashboard", []string{"dashboard", "-n", ns, "nosuch"}, "no RayCluster of that name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := raystepIn(t, env, tc.args...)
			if o.code != 2 || !strings.Contains(o.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", o.code, o.stderr, tc.want)
			}
		})
	}
}
