package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/test/cluster"
	"github.com/raystep/raystep/test/raytest"
)

// plantedEnv is a job's runtime_env value; no answer may contain it.
const plantedEnv = "planted-env-value-8d2b71"

// gatedJob prints "first line", waits until the file gate exists, prints
// "second line" and exits: the test decides when the second line comes.
// (Ray's log starts with the entrypoint: the lines it prints are spelt
// differently there.)
func gatedJob(gate string) string {
	return fmt.Sprintf(`python -c "import os, time
print('first' + ' line', flush=True)
while not os.path.exists('%s'): time.sleep(0.1)
print('second' + ' line', flush=True)"`, gate)
}

// rayHead is a real Ray head with token authentication, as the local
// backend's heads have it: the session's shared one (test/raytest).
var rayHead = raytest.Shared{Options: rayhead.Options{TokenAuth: true}}

// kube is the control plane the package's tests share, each in a
// namespace of its own: starting one is not what they test.
var kube struct {
	once sync.Once
	c    *cluster.Cluster
	err  error
}

// sharedCluster starts kube on first use.
func sharedCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	kube.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		kube.c, kube.err = cluster.Start(ctx, cluster.Options{Logf: t.Logf})
	})
	if kube.err != nil {
		t.Fatalf("start the package's cluster: %v", kube.err)
	}
	return kube.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	rayHead.Stop()
	if kube.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := kube.c.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "stop the package's cluster:", err)
			code = max(code, 1)
		}
		cancel()
	}
	os.Exit(code)
}

// localServer serves the cluster pages of one local head, a real
// token-authenticated Ray head, behind the UI's token.
type localServer struct {
	head raytest.Head
	url  string // the server's base URL
	page string // the cluster page's path
}

func newLocalServer(t *testing.T) localServer {
	t.Helper()
	head := rayHead.Head(t)
	store := &Store{}
	store.SetLocal([]*Record{{Record: fleet.Record{Name: "alice-dev", ClusterKind: "interactive", Kind: "interactive",
		Owner: "alice", Deployment: "ready", Created: time.Now()}}})
	reach := func(context.Context, *Record) (Head, error) {
		return Head{URL: head.DashboardURL(), Token: head.Token()}, nil
	}
	srv := &Server{Store: store, Auth: Auth{Token: plantedToken}, Reach: reach, Poll: 500 * time.Millisecond}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close() // ends the tails and probes: the streams they feed end too
		hs.CloseClientConnections()
		hs.Close()
	})
	return localServer{head: head, url: hs.URL, page: "/clusters/_local/alice-dev/"}
}

// submit submits the gated job with a planted env value.
func (l localServer) submit(t *testing.T, gate string) string {
	t.Helper()
	return l.submitJob(t, gatedJob(gate))
}

// submitJob submits entrypoint with a planted env value.
func (l localServer) submitJob(t *testing.T, entrypoint string) string {
	t.Helper()
	resp, err := l.ray(t).Submit(t.Context(), raysubmit.SubmitRequest{Entrypoint: entrypoint,
		RuntimeEnv: map[string]any{"env_vars": map[string]string{"API_KEY": plantedEnv}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.SubmissionID
}

func (l localServer) ray(t *testing.T) *raysubmit.Client {
	t.Helper()
	c, err := raysubmit.New(raysubmit.Config{BaseURL: l.head.DashboardURL(), Token: l.head.Token()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// await waits until job id ends and fails the test unless it succeeded.
func (l localServer) await(t *testing.T, id string) {
	t.Helper()
	c := l.ray(t)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		d, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.Terminal() {
			if d.Status != raysubmit.StatusSucceeded {
				t.Fatalf("job %s %s: %s", id, d.Status, d.Message)
			}
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("job %s: %v", id, t.Context().Err())
		case <-tick.C:
		}
	}
}

// TestClusterPageLocalHead runs the cluster page against a real Ray head
// as the local backend starts it: a job's log lines arrive live as the
// job prints them, the page lists the job with its status and duration,
// the whole log downloads, the utilization charts fill, the dashboard
// proxy serves the real /api/jobs/ with the cluster's token added, and
// no answer carries the UI's token, the head's token or the job's env.
func TestClusterPageLocalHead(t *testing.T) {
	l := newLocalServer(t)
	gate := filepath.Join(t.TempDir(), "gate")
	id := l.submit(t, gate)
	secrets := []string{plantedToken, plantedEnv, l.head.Token()}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := streamPath(t, ctx, l.url+l.page+"jobs/"+id+"/events", secrets)
	var text strings.Builder
	await(t, logs, "the first line", func(e event) bool { return appendLines(t, &text, e) && hasLine(text.String(), "first line") })
	if hasLine(text.String(), "second line") {
		t.Fatalf("the second line came before the job printed it:\n%s", text.String())
	}
	if page := getAll(t, l.url+l.page+"jobs/"+id+"/", secrets); !strings.Contains(page, "\nfirst line") {
		t.Errorf("the log page lacks the first line:\n%s", page)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	await(t, logs, "the second line", func(e event) bool { return appendLines(t, &text, e) && hasLine(text.String(), "second line") })
	await(t, logs, "the log's end", func(e event) bool { return e.name == "end" })

	cluster := streamPath(t, ctx, l.url+l.page+"events", secrets)
	await(t, cluster, "the job SUCCEEDED", func(e event) bool {
		return e.name == "jobs" && strings.Contains(e.data, `"id":"`+id+`"`) && strings.Contains(e.data, `"status":"SUCCEEDED"`)
	})
	page := getAll(t, l.url+l.page, secrets)
	for _, want := range []string{"alice-dev", id, "SUCCEEDED", `href="jobs/` + id + `/"`, "util/cpu.svg", `href="dashboard/"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the cluster page lacks %q:\n%s", want, page)
		}
	}

	t.Run("download", func(t *testing.T) {
		// Ray writes its own "Running entrypoint" line through a buffer it
		// flushes after starting the entrypoint, so on a busy machine it can
		// land between the job's lines: the job's two lines are checked in
		// order, not side by side.
		resp, body := fetch(t, l.url+l.page+"jobs/"+id+"/logs.txt", plantedToken, secrets)
		first, second := lineIndex(body, "first line"), lineIndex(body, "second line")
		if resp.StatusCode != http.StatusOK || first < 0 || second < first ||
			!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("logs.txt: %s %q\n%s", resp.Status, resp.Header.Get("Content-Disposition"), body)
		}
		if resp, _ := fetch(t, l.url+l.page+"jobs/no-such-job/logs.txt", plantedToken, secrets); resp.StatusCode != http.StatusNotFound {
			t.Errorf("logs.txt of an unknown job: %s, want 404", resp.Status)
		}
	})

	t.Run("utilization", func(t *testing.T) {
		// Each poll of the head ends in a "util" event; the head's reporter
		// publishes node stats a few seconds after it starts.
		await(t, cluster, "a CPU chart with a node's line", func(e event) bool {
			if e.name != "util" {
				return false
			}
			svg := getAll(t, l.url+l.page+"util/cpu.svg", secrets)
			return strings.Contains(svg, "<polyline") && strings.Contains(svg, "(head)")
		})
		if svg := getAll(t, l.url+l.page+"util/mem.svg", secrets); !strings.Contains(svg, "<polyline") {
			t.Errorf("the memory chart has no line:\n%s", svg)
		}
	})

	t.Run("dashboard proxy", func(t *testing.T) {
		resp, body := fetch(t, l.url+l.page+"dashboard/api/jobs/", plantedToken, secrets)
		var jobs []raysubmit.JobDetails
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &jobs) != nil {
			t.Fatalf("GET dashboard/api/jobs/: %s\n%s", resp.Status, body)
		}
		i := slices.IndexFunc(jobs, func(j raysubmit.JobDetails) bool { return j.SubmissionID == id })
		if i < 0 || jobs[i].Status != raysubmit.StatusSucceeded {
			t.Fatalf("dashboard/api/jobs/ = %+v, want the job %s, SUCCEEDED", jobs, id)
		}
		if env, _ := jobs[i].RuntimeEnv["env_vars"].(map[string]any); env["API_KEY"] != hiddenEnv {
			t.Errorf("env_vars through the proxy = %v, want API_KEY hidden", env)
		}
		if resp, _ := fetch(t, l.url+l.page+"dashboard/api/jobs/", "", secrets); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the proxy without the UI's token: %s, want 401", resp.Status)
		}
		if resp, _ := fetch(t, l.head.DashboardURL()+"/api/jobs/", "", nil); resp.StatusCode < 400 {
			t.Errorf("the head answered without its token (%s): the proxy's token is not what let it in", resp.Status)
		}
		if resp, body := fetch(t, l.url+l.page+"dashboard/", plantedToken, secrets); resp.StatusCode != http.StatusOK ||
			!strings.Contains(body, "Ray Dashboard") {
			t.Errorf("GET dashboard/: %s\n%.300s", resp.Status, body)
		}
	})

	t.Run("env values hidden in every answer", func(t *testing.T) {
		// A job whose tasks carry the env: the state API shows it in their
		// runtime_env_info, as a serialized runtime_env.
		tasks := l.submitJob(t, `python -c "import ray; ray.init(); print(ray.get(ray.remote(lambda: 41).remote()) + 1)"`)
		l.await(t, tasks)
		// The head answers these with the job's env value in some (as an
		// object, or inside a serialized runtime_env); through the proxy
		// fetch fails the test if any answer still carries it.
		leaks := 0
		for _, p := range []string{"api/jobs/", "api/jobs/" + id, "logical/actors", "api/v0/tasks?detail=1&limit=100",
			"api/v0/placement_groups?detail=1&limit=100", "nodes?view=summary", "api/cluster_status?format=1"} {
			if _, raw := fetch(t, l.head.DashboardURL()+"/"+p, l.head.Token(), nil); strings.Contains(raw, plantedEnv) && !strings.HasPrefix(p, "api/jobs") {
				leaks++
			}
			if resp, body := fetch(t, l.url+l.page+"dashboard/"+p, plantedToken, secrets); resp.StatusCode != http.StatusOK {
				t.Errorf("GET dashboard/%s: %s\n%.300s", p, resp.Status, body)
			}
		}
		if leaks == 0 {
			t.Error("no answer but the Jobs API's carries the env value at the head: the test proves nothing beyond api/jobs")
		}
		for _, p := range []string{"api/v0/jobs", "worker/cpu_profile?pid=1&ip=127.0.0.1", "memory_profile?pid=1", "worker/traceback?pid=1"} {
			if resp, _ := fetch(t, l.url+l.page+"dashboard/"+p, plantedToken, secrets); resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET dashboard/%s: %s, want 403", p, resp.Status)
			}
		}
	})
}

// appendLines adds a "lines" event's lines to text and reports whether e
// was one.
func appendLines(t *testing.T, text *strings.Builder, e event) bool {
	t.Helper()
	if e.name != "lines" {
		return false
	}
	var d struct {
		Lines []string `json:"lines"`
	}
	if err := json.Unmarshal([]byte(e.data), &d); err != nil {
		t.Fatalf("lines event %s: %v", e.data, err)
	}
	for _, l := range d.Lines {
		text.WriteString(l + "\n")
	}
	return true
}

// hasLine reports whether text has the line line.
func hasLine(text, line string) bool { return lineIndex(text, line) >= 0 }

// lineIndex is where text has the line line first, -1 when nowhere.
func lineIndex(text, line string) int {
	return strings.Index("\n"+text+"\n", "\n"+line+"\n")
}
