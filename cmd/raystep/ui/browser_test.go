package ui

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/test/browser"
)

// TestPageOf1000InBrowser opens the page of 1,000 clusters in chromium:
// it loads and goes live, and the find box narrows it to one row in the
// browser, both quickly enough to use.
func TestPageOf1000InBrowser(t *testing.T) {
	store := &Store{}
	now := time.Now()
	for i := range 1000 {
		store.Put(&Record{Record: fleet.Record{Namespace: fmt.Sprintf("team-%d", i%10), Name: fmt.Sprintf("cluster-%04d", i),
			ClusterKind: "step", Kind: "train", Owner: fmt.Sprintf("owner-%d", i%7), GPUs: "a100-80gb=8", Deployment: "Running",
			JobStatus: "RUNNING", Created: now.Add(-time.Hour), Dashboard: "http://head:8265"}})
	}
	srv := httptest.NewServer((&Server{Store: store, Scope: "every namespace"}).Handler())
	t.Cleanup(srv.Close) // after the browser's cleanup has closed its event stream
	tab := browser.New(t)
	start := time.Now()
	if err := chromedp.Do(tab.Ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	live := `document.getElementById("live").textContent === "Live." && document.querySelectorAll("#clusters tbody tr").length === 1000`
	if _, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](live, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the page of 1,000 clusters did not go live: %v", err)
	}
	loaded := time.Since(start)
	start = time.Now()
	if err := chromedp.Do(tab.Ctx, chromedp.SendKeys(chromedp.ID("quick"), "cluster-0999")); err != nil {
		t.Fatal(err)
	}
	one := `[...document.querySelectorAll("#clusters tbody tr")].filter((tr) => !tr.hidden).length === 1 &&
		document.getElementById("count").textContent === "1 cluster"`
	if _, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](one, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the find box did not narrow the page to cluster-0999: %v", err)
	}
	found := time.Since(start)
	tab.Shot("found-one-of-1000")
	t.Logf("FIGURES 1,000 clusters: loaded and live in %s; typing a name narrowed it to one row in %s", loaded.Round(time.Millisecond), found.Round(time.Millisecond))
	if loaded > 20*time.Second || found > 10*time.Second {
		t.Errorf("load %s, find %s: too slow to use", loaded, found)
	}
}

// TestRowsMoveOnBetweenUpdates: with no change to a cluster, its Age,
// Expires and GPU-hours keep moving in the open page, from the server's
// clock, without a reload; so does how long an idle cluster has been idle,
// whose released GPUs the row says.
func TestRowsMoveOnBetweenUpdates(t *testing.T) {
	store := &Store{}
	now := time.Now()
	expires := now.Add(10 * time.Minute)
	// 720 GPUs add one GPU-hour every 5 s, so the figure visibly moves.
	store.Put(&Record{Record: fleet.Record{Namespace: "ml-ads", Name: "big-train", ClusterKind: "step", Kind: "train",
		Owner: "ads", GPUs: "a100-80gb=720", Deployment: "Running", JobStatus: "RUNNING", Created: now.Add(-110 * time.Second),
		Expires: &expires}, GPUSpans: []GPUSpan{{GPUs: 720, Since: now.Add(-100 * time.Second)}}})
	idleSince := now.Add(-110 * time.Second)
	store.Put(&Record{Record: fleet.Record{Namespace: "ml-ads", Name: "alice-dev", ClusterKind: "interactive", Kind: "interactive",
		Owner: "alice", GPUs: "a100-80gb=2", Deployment: "ready", Created: now.Add(-time.Hour), Expires: &expires,
		IdleSince: &idleSince, Released: true}})
	srv := httptest.NewServer((&Server{Store: store, Scope: "every namespace"}).Handler())
	t.Cleanup(srv.Close)
	tab := browser.New(t)
	if err := chromedp.Do(tab.Ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	const cells = `(() => { const tr = document.querySelector("#clusters tbody tr[data-key$='big-train']");
		return [tr.querySelector(".age").textContent, tr.querySelector(".expires").textContent, tr.querySelector(".gpu-hours").textContent]; })()`
	if _, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](`document.getElementById("live").textContent === "Live."`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatal(err)
	}
	first, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[[]string](cells))
	if err != nil {
		t.Fatal(err)
	}
	tab.Shot("before")
	// Age passes two minutes (110 s at the start, "2m" once 120 s passed),
	// and Expires and GPU-hours change too, all with no event from the server.
	moved := fmt.Sprintf(`(() => { const c = %s; return /^2m(\d+s)?$/.test(c[0]) && c[1] !== %q && c[2] !== %q; })()`, cells, first[1], first[2])
	if _, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](moved, chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		last, _ := chromedp.Run(tab.Ctx, chromedp.Evaluate[[]string](cells))
		t.Fatalf("age, expiry and GPU-hours went from %q to %q, want them to move on: %v", first, last, err)
	}
	tab.Shot("after")
	const idle = `(() => { const tr = document.querySelector("#clusters tbody tr[data-key$='alice-dev']");
		return /^2m(\d+s)?$/.test(tr.querySelector(".idle").textContent) && tr.textContent.includes("a100-80gb × 2 (released while idle)"); })()`
	if _, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](idle, chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		row, _ := chromedp.Run(tab.Ctx, chromedp.Evaluate[string](`document.querySelector("#clusters tbody tr[data-key$='alice-dev']").textContent`))
		t.Fatalf("the idle cluster's row %q: want idle for 2m and its GPUs released: %v", row, err)
	}
}
