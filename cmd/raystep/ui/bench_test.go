package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	if err := store.Watch(ctx, c.Clientset, ray, ns); err != nil {
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
