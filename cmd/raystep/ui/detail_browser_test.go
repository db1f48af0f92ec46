package ui

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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
