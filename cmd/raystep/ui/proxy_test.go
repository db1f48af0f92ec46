package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/fleet"
)

// TestDashboardReads: the proxy forwards what the dashboard's pages read
// and refuses the GETs that act (profilers, tracebacks, kill), the state
// API's job list, and any path that a "." or ".." segment would turn
// into another once the dashboard resolves it.
func TestDashboardReads(t *testing.T) {
	for _, p := range []string{"", "index.html", "static/js/main.84605326.js", "static/media/logo.svg", "api/jobs/",
		"api/jobs/raysubmit_x", "api/jobs/raysubmit_x/logs", "nodes", "nodes/abc", "logical/actors", "api/v0/tasks",
		"api/v0/logs/file", "api/cluster_status", "timezone", "api/serve/applications/", "api/data/datasets/02000000"} {
		if !dashboardRead(p) {
			t.Errorf("dashboardRead(%q) = false, want the page's read forwarded", p)
		}
	}
	for _, p := range []string{"worker/cpu_profile", "worker/gpu_profile", "worker/traceback", "memory_profile",
		"task/cpu_profile", "task/traceback", "api/actors/kill", "api/v0/jobs", "api/jobs", "api/jobs//logs",
		"static", "static/", "static/../worker/cpu_profile", "nodes/../worker/traceback", "static/./x", "static/a\\..\\b",
		"api/jobs/x/stop", "utils/jstack", "api/v0/tasks/x", "api/component_activities", "api/prometheus/sd",
		"speedscope-1.5.3/index.html", "logs/raylet.out", "api/v0/delay/10"} {
		if dashboardRead(p) {
			t.Errorf("dashboardRead(%q) = true, want it refused", p)
		}
	}
}

// TestDashboardProxyRefusesBeforeReaching: a refused path is answered
// 403 by the UI itself: the cluster's head is never asked.
func TestDashboardProxyRefusesBeforeReaching(t *testing.T) {
	store := &Store{}
	store.Put(&Record{Record: fleet.Record{Namespace: "ml", Name: "dev", ClusterKind: "interactive", Created: time.Now()}})
	asked := 0
	head := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked++ }))
	defer head.Close()
	reach := func(context.Context, *Record) (Head, error) { return Head{URL: head.URL}, nil }
	srv := httptest.NewServer((&Server{Store: store, Reach: reach}).Handler())
	defer srv.Close()
	for _, p := range []string{"worker/cpu_profile?pid=1&ip=127.0.0.1&duration=5", "memory_profile?pid=1", "worker/traceback?pid=1",
		"api/v0/jobs", "static%2F..%2Fworker%2Fcpu_profile?pid=1", "api/actors/kill?actor_id=1"} {
		if code := request(t, srv, "/clusters/ml/dev/dashboard/"+p, nil); code != http.StatusForbidden {
			t.Errorf("GET dashboard/%s: %d, want 403", p, code)
		}
	}
	if asked != 0 {
		t.Errorf("the head was asked %d times for refused paths", asked)
	}
	if code := request(t, srv, "/clusters/ml/dev/dashboard/api/jobs/", nil); code != http.StatusOK || asked != 1 {
		t.Errorf("GET dashboard/api/jobs/: %d, the head asked %d times; want 200 from it", code, asked)
	}
}

// TestHideEnv: env var values are hidden wherever a dashboard answer
// carries a runtime_env: as an object (Jobs API, Serve), inside a
// serialized_runtime_env string (state API rows, runtime_env_info), and
// a serialized one that does not parse is hidden whole.
func TestHideEnv(t *testing.T) {
	serialized, _ := json.Marshal(map[string]any{"env_vars": map[string]string{"JUPYTER_TOKEN": plantedEnv}, "pip": []string{"x"}})
	in := map[string]any{
		"data": map[string]any{"result": map[string]any{"result": []any{
			map[string]any{"job_id": "01", "runtime_env": map[string]any{"env_vars": map[string]any{"API_KEY": plantedEnv}}},
			map[string]any{"task_id": "t", "runtime_env_info": map[string]any{"serialized_runtime_env": string(serialized)}},
			map[string]any{"actor_id": "a", "serialized_runtime_env": `{"env_vars": {"K": "` + plantedEnv + `"`},
			map[string]any{"app": map[string]any{"deployments": []any{map[string]any{"ray_actor_options": map[string]any{
				"runtimeEnv": map[string]any{"env_vars": map[string]any{"K": plantedEnv}}}}}}},
			map[string]any{"env_vars": `{"K":"` + plantedEnv + `"}`},
		}}},
	}
	b, err := json.Marshal(hideEnv(in))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	if strings.Contains(out, plantedEnv) {
		t.Fatalf("hideEnv left an env value:\n%s", out)
	}
	for _, want := range []string{`"API_KEY":"` + hiddenEnv, `\"JUPYTER_TOKEN\":\"` + hiddenEnv, `"pip\":[\"x\"]`, `"job_id":"01"`} {
		if !strings.Contains(out, strings.ReplaceAll(want, `"pip\"`, `\"pip\"`)) {
			t.Errorf("hideEnv's answer lacks %s:\n%s", want, out)
		}
	}
}
