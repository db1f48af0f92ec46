package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/history"
)

// historyFixture is a history of three ended steps with their logs: a
// succeeded local train step with its utilization, a failed KubeRay eval
// step of a Dagster run, a SIGTERMed one.
func historyFixture(t testing.TB) (*history.Index, history.Dir) {
	t.Helper()
	d := history.Dir{Root: t.TempDir()}
	now := time.Now().UTC()
	recs := []history.Record{
		{Name: "raystep-train-ok-1", Kind: "step", JobKind: "train", Spec: "ads-ranking-train", Owner: "ana", Backend: "local",
			ExitCode: 0, Reason: history.Succeeded, Status: "SUCCEEDED", Started: now.Add(-2 * time.Hour), Ended: now.Add(-time.Hour),
			Phases: map[string]float64{"run": 3540, "submit": 0.01, "provision": 12},
			Utilization: []history.NodeUtilization{{Node: "ray-head (head)", Samples: 354, CPU: history.Stat{Mean: 71.5, Peak: 99},
				Memory: history.Stat{Mean: 40, Peak: 62}}, {Node: "gpu-worker-0", Samples: 354, CPU: history.Stat{Mean: 20, Peak: 35},
				Memory: history.Stat{Mean: 55, Peak: 70}, GPU: &history.Stat{Mean: 87, Peak: 100}}}},
		{Name: "raystep-eval-bad-2", Kind: "step", JobKind: "eval", Spec: "ads-ranking-eval", Owner: "bo", Backend: "kuberay",
			Namespace: "ml-ads", DagsterRun: "run-42", Assets: []string{"ads/ranking_eval"}, GPUType: "a100-80gb", GPUCount: 8, GPUHours: 4,
			ExitCode: 3, Reason: history.Failed, Status: "FAILED", Message: "Job entrypoint command failed with exit code 1",
			Started: now.Add(-40 * time.Minute), Ended: now.Add(-10 * time.Minute)},
		{Name: "raystep-train-term-3", Kind: "step", JobKind: "train", Spec: "ads-ranking-train", Owner: "ana", Backend: "local",
			ExitCode: 143, Reason: "cancelled (SIGTERM)", Status: "STOPPED", Started: now.Add(-5 * time.Minute), Ended: now.Add(-time.Minute)},
	}
	for _, r := range recs {
		w, err := d.NewLogWriter(r.Name, history.DefaultLogCap)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "driver of %s\n<script>alert(1)</script>\n", r.Name)
		r.Log = w.Close()
		if err := d.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	return history.NewIndex(&d, nil), d
}

// TestHistoryView: the list, its filters, a step's page with its record,
// phases, utilization and log, the log's download, and the same records
// as JSON; unknown and path-like names are 404s.
func TestHistoryView(t *testing.T) {
	idx, dir := historyFixture(t)
	dagster, _ := url.Parse("http://dagster.example:3000/")
	srv := httptest.NewServer((&Server{Store: &Store{}, History: idx, Dagster: dagster}).Handler())
	defer srv.Close()
	page := get(t, srv.URL+"/history", "", http.StatusOK)
	for _, want := range []string{"raystep-train-ok-1", "raystep-eval-bad-2", "raystep-train-term-3", "3 steps",
		`href="http://dagster.example:3000/runs/run-42"`, "failed, job FAILED", "cancelled (SIGTERM), job STOPPED", "8 × a100-80gb"} {
		if !strings.Contains(page, want) {
			t.Errorf("/history lacks %q", want)
		}
	}
	if i, j := strings.Index(page, "raystep-train-term-3"), strings.Index(page, "raystep-train-ok-1"); i > j {
		t.Errorf("/history does not list the latest first")
	}
	for query, want := range map[string][]string{
		"owner=ana":                {"raystep-train-ok-1", "raystep-train-term-3"},
		"status=cancelled":         {"raystep-train-term-3"},
		"status=FAILED":            {"raystep-eval-bad-2"},
		"kind=eval":                {"raystep-eval-bad-2"},
		"run=run-42":               {"raystep-eval-bad-2"},
		"since=30m":                {"raystep-eval-bad-2", "raystep-train-term-3"},
		"owner=ana&status=succeed": {"raystep-train-ok-1"},
		"owner=nobody":             nil,
	} {
		var recs []history.Record
		if err := json.Unmarshal([]byte(get(t, srv.URL+"/api/history?"+query, "", http.StatusOK)), &recs); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.Name)
		}
		if strings.Join(got, ",") != strings.Join(reverse(want), ",") && strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("/api/history?%s = %v, want %v", query, got, want)
		}
		html := get(t, srv.URL+"/history?"+query, "", http.StatusOK)
		if strings.Count(html, `<tr data-name=`) != len(want) {
			t.Errorf("/history?%s shows %d rows, want %d", query, strings.Count(html, `<tr data-name=`), len(want))
		}
	}
	get(t, srv.URL+"/api/history?since=yesterday", "", http.StatusBadRequest)

	step := get(t, srv.URL+"/history/raystep-train-ok-1/", "", http.StatusOK)
	for _, want := range []string{"succeeded", "ray-head (head)", "72% (peak 99%)", "gpu-worker-0", "87% (peak 100%)",
		"driver of raystep-train-ok-1", "&lt;script&gt;alert(1)&lt;/script&gt;", "59m0s"} {
		if !strings.Contains(step, want) {
			t.Errorf("the step's page lacks %q", want)
		}
	}
	if strings.Contains(step, "<script>alert") {
		t.Errorf("the step's page carries the log's markup unescaped")
	}
	if i, j := strings.Index(step, ">provision<"), strings.Index(step, ">run<"); i < 0 || i > j {
		t.Errorf("the step's page lists its phases out of order")
	}
	bad := get(t, srv.URL+"/history/raystep-eval-bad-2/", "", http.StatusOK)
	if !strings.Contains(bad, "Job entrypoint command failed with exit code 1") || !strings.Contains(bad, "Not sampled") {
		t.Errorf("the failed step's page lacks Ray's message or the note that it has no utilization")
	}
	logText := get(t, srv.URL+"/history/raystep-train-ok-1/driver.log", "", http.StatusOK)
	want, _ := os.ReadFile(dir.LogPath("raystep-train-ok-1"))
	if logText != string(want) {
		t.Errorf("driver.log = %q, want %q", logText, want)
	}
	var rec history.Record
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/api/history/raystep-eval-bad-2", "", http.StatusOK)), &rec); err != nil || rec.GPUHours != 4 {
		t.Errorf("/api/history/raystep-eval-bad-2 = %+v, %v", rec, err)
	}
	for _, p := range []string{"/history/raystep-nope-9/", "/api/history/raystep-nope-9", "/history/..%2F..%2Fetc/driver.log",
		"/history/UPPER/", "/api/history/a.b"} {
		get(t, srv.URL+p, "", http.StatusNotFound)
	}
	if _, err := os.Stat(filepath.Join(dir.Root, "raystep-nope-9")); err == nil {
		t.Errorf("a read made a directory")
	}
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// TestHistoryBehindAuth: the History view and its API need the token
// like every other route, and refuse another host or another site's page.
func TestHistoryBehindAuth(t *testing.T) {
	idx, _ := historyFixture(t)
	srv := httptest.NewServer((&Server{Store: &Store{}, History: idx, Auth: Auth{Token: plantedToken}}).Handler())
	defer srv.Close()
	paths := []string{"/history", "/api/history", "/history/raystep-train-ok-1/", "/history/raystep-train-ok-1/driver.log",
		"/api/history/raystep-train-ok-1"}
	for _, p := range paths {
		get(t, srv.URL+p, "", http.StatusUnauthorized)
		get(t, srv.URL+p, "wrong", http.StatusUnauthorized)
		get(t, srv.URL+p, plantedToken, http.StatusOK)
		if code := request(t, srv, p, map[string]string{"Authorization": "Bearer " + plantedToken, "Host": "rebind.attacker.example"}); code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with another Host: %d, want 421", p, code)
		}
		if code := request(t, srv, p, map[string]string{"Authorization": "Bearer " + plantedToken, "Origin": "https://evil.example"}); code != http.StatusForbidden {
			t.Errorf("GET %s from another site's page: %d, want 403", p, code)
		}
	}
}

// TestHistoryViewWithoutHistory: a ui that keeps no history says so.
func TestHistoryViewWithoutHistory(t *testing.T) {
	srv := httptest.NewServer((&Server{Store: &Store{}}).Handler())
	defer srv.Close()
	if page := get(t, srv.URL+"/history", "", http.StatusOK); !strings.Contains(page, "No history is kept here") {
		t.Errorf("/history without a history: %s", page)
	}
	if body := get(t, srv.URL+"/api/history", "", http.StatusOK); strings.TrimSpace(body) != "[]" {
		t.Errorf("/api/history without a history = %s, want []", body)
	}
}
