package ui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/raystep/raystep/test/browser"
)

// TestJobLogInBrowser opens a job's log page in chromium on a real Ray
// head: the line the job printed is there, and the line it prints later
// appears without a reload (a mark set on the page's window survives),
// then the page says the log is complete. Screenshots of both moments
// and of the cluster page are saved.
func TestJobLogInBrowser(t *testing.T) {
	l := newLocalServer(t)
	gate := filepath.Join(t.TempDir(), "gate")
	id := l.submit(t, gate)
	tab := browser.New(t)
	ctx, cancel := context.WithTimeout(tab.Ctx, 3*time.Minute)
	defer cancel()

	// ?token= sets the UI's cookie and sends the browser on without it.
	if err := chromedp.Do(ctx, chromedp.Navigate(l.url+l.page+"jobs/"+id+"/?token="+plantedToken)); err != nil {
		t.Fatal(err)
	}
	has := func(line string) string {
		return `document.getElementById("log").textContent.split("\n").includes("` + line + `")`
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](has("first line"))); err != nil {
		t.Fatalf("waiting for the first line in the page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.raystepMark = "no reload"`)); err != nil {
		t.Fatal(err)
	}
	tab.Shot("log-first-line")
	second, err := chromedp.Run(ctx, chromedp.Evaluate[bool](has("second line")))
	if err != nil {
		t.Fatal(err)
	}
	if second {
		t.Fatal("the page shows the second line before the job printed it")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](has("second line"))); err != nil {
		t.Fatalf("waiting for the second line in the page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").textContent === "The log is complete."`)); err != nil {
		t.Fatalf("waiting for the page to say the log is complete: %v", err)
	}
	mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.raystepMark || "reloaded"`))
	if err != nil {
		t.Fatal(err)
	}
	if mark != "no reload" {
		t.Errorf("the page was reloaded to show the second line (mark %q)", mark)
	}
	tab.Shot("log-second-line")

	if err := chromedp.Do(ctx, chromedp.Navigate(l.url+l.page)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#jobs tbody").textContent.includes("SUCCEEDED")`)); err != nil {
		t.Fatalf("the cluster page lists no SUCCEEDED job: %v", err)
	}
	tab.Shot("cluster-page")
}

// TestDashboardInBrowser opens the proxied Ray dashboard of a real head in
// chromium: its overview and a job's page render with the job's id and
// status, and none of what those pages read is refused by the proxy's
// allow-list or the UI's auth (which would make the dashboard ask for
// Ray's token). Ray's own errors (no Grafana, no Serve) are not ours to
// mind. Screenshots of both pages are saved.
func TestDashboardInBrowser(t *testing.T) {
	l := newLocalServer(t)
	id := l.submitJob(t, `python -c "print('dashboard' + ' job')"`)
	l.await(t, id)
	tab := browser.New(t)
	ctx, cancel := context.WithTimeout(tab.Ctx, 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var refused []string
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventResponseReceived); ok && (e.Response.Status == 401 || e.Response.Status == 403) {
			mu.Lock()
			refused = append(refused, fmt.Sprintf("%d %s", e.Response.Status, e.Response.URL))
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	base := l.url + l.page + "dashboard/"
	text := func(want ...string) string {
		var conds []string
		for _, w := range want {
			conds = append(conds, `document.body.innerText.includes(`+strconv.Quote(w)+`)`)
		}
		return strings.Join(conds, " && ")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"?token="+plantedToken)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#/overview")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](text("Cluster status and autoscaler", "Recent jobs", id))); err != nil {
		tab.Shot("dashboard-overview-incomplete")
		t.Fatalf("the proxied dashboard's overview does not show its cluster status and the job %s: %v", id, err)
	}
	tab.Shot("dashboard-overview")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#/jobs/"+id)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](text(id, "SUCCEEDED"))); err != nil {
		tab.Shot("dashboard-job-incomplete")
		t.Fatalf("the proxied dashboard's job page does not show the job %s SUCCEEDED: %v", id, err)
	}
	tab.Shot("dashboard-job")
	if asks, err := chromedp.Run(ctx, chromedp.Evaluate[bool](text("Authentication Token Required"))); err != nil || asks {
		t.Errorf("the proxied dashboard asks for Ray's token (%v): the proxy should have made that unnecessary", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) > 0 {
		t.Errorf("the dashboard's pages were refused reads:\n%s", strings.Join(refused, "\n"))
	}
}
