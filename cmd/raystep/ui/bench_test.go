package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raystep/raystep/history"
	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
	"github.com/raystep/raystep/test/cluster"
)

// renderBudget is the longest one render of the 1,000-cluster page may
// take on the server.
const renderBudget = 200 * time.Millisecond

// BenchmarkRender1000FromAPI creates 1,000 raystep RayJobs in the real
// API server (suspended, so the operator leaves them be), lets the
// informers read them, and renders the page of all of them; it fails
// when a render takes longer than renderBudget on average.
func BenchmarkRender1000FromAPI(b *testing.B) {
	c := cluster.New(b, cluster.Options{})
	ray, err := rayclient.NewForConfig(c.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, n = "default", 1000
	createJobs(b, ray, ns, n)
	store := &Store{}
	own := kubeapitest.New(b, c.Config) // raystep ui's own clients
	if err := store.Watch(ctx, own, own, ns); err != nil {
		b.Fatal(err)
	}
	if got := len(store.Records()); got != n {
		b.Fatalf("the informers hold %d records, want %d", got, n)
	}
	s := &Server{Store: store, Scope: "namespace " + ns}
	var sb strings.Builder
	start := time.Now()
	for b.Loop() {
		sb.Reset()
		if err := s.render(&sb, Filter{}); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	if !strings.Contains(sb.String(), "ads-train-0999") {
		b.Fatalf("the page lacks the last cluster")
	}
	b.ReportMetric(float64(sb.Len())/1024, "KiB/page")
	if per > renderBudget {
		b.Fatalf("one render of %d clusters took %s, want under %s", n, per, renderBudget)
	}
}

// createJobs creates n suspended raystep RayJobs in ns, a few at a time.
func createJobs(b *testing.B, ray rayclient.Interface, ns string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				_, err := ray.RayV1().RayJobs(ns).Create(context.Background(), stepJob(ns, fmt.Sprintf("ads-train-%04d", i)), metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create RayJob: %v", err)
	}
}

// historyBudget is the longest /api/history of 10,000 records may take.
const historyBudget = 200 * time.Millisecond

// BenchmarkHistoryAPI10000 answers /api/history over a history of 10,000
// ended steps on disk, through HTTP, as a refreshing client sees it: the
// index has read the records once (the first request, reported as
// cold-ms), and each request lists them again, re-reading none that did
// not change. It fails when a request takes longer than historyBudget.
func BenchmarkHistoryAPI10000(b *testing.B) {
	const n = 10000
	d := history.Dir{Root: b.TempDir()}
	now := time.Now().UTC()
	for i := range n {
		rec := history.Record{Version: 1, Name: fmt.Sprintf("raystep-ads-train-%05d", i), Kind: "step", JobKind: "train",
			Spec: "ads-ranking-train", Owner: fmt.Sprintf("owner-%d", i%7), Backend: "kuberay", Namespace: "ml-ads",
			DagsterRun: fmt.Sprintf("run-%d", i/10), GPUType: "a100-80gb", GPUCount: 8, GPUHours: 1.5, ExitCode: 0,
			Reason: history.Succeeded, Status: "SUCCEEDED", Started: now.Add(-time.Duration(i+60) * time.Minute),
			Ended: now.Add(-time.Duration(i) * time.Minute), Phases: map[string]float64{"provision": 12, "run": 3600, "teardown": 14},
			Utilization: []history.NodeUtilization{{Node: "head (head)", Samples: 360, CPU: history.Stat{Mean: 30, Peak: 90}}}}
		data, err := json.Marshal(rec)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(d.Root, rec.Name), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.Root, rec.Name, "record.json"), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	srv := httptest.NewServer((&Server{Store: &Store{}, History: history.NewIndex(&d, nil)}).Handler())
	defer srv.Close()
	fetchAll := func() int {
		resp, err := http.Get(srv.URL + "/api/history")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var recs []json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
			b.Fatal(err)
		}
		return len(recs)
	}
	start := time.Now()
	if got := fetchAll(); got != n {
		b.Fatalf("/api/history has %d records, want %d", got, n)
	}
	cold := time.Since(start)
	start = time.Now()
	for b.Loop() {
		fetchAll()
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(cold.Milliseconds()), "cold-ms")
	if per > historyBudget {
		b.Fatalf("/api/history of %d records took %s, want under %s", n, per, historyBudget)
	}
}
