package ui

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raystep/raystep/history"
	"github.com/raystep/raystep/test/browser"
)

// TestHistoryViewInBrowser opens the History view in chromium over a
// history of a succeeded, a failed, a SIGTERMed and a reaped step: each
// is listed with how it ended, the status filter narrows the list, and
// each step's page shows its driver log and its utilization table.
func TestHistoryViewInBrowser(t *testing.T) {
	idx, dir := historyFixture(t)
	now := time.Now().UTC()
	reaped := history.Record{Name: "raystep-train-killed-4", Kind: "step", JobKind: "train", Spec: "ads-ranking-train",
		Owner: "ana", Backend: "kuberay", ExitCode: -1, Reason: history.Reaped, Started: now.Add(-3 * time.Hour),
		Ended: now.Add(-150 * time.Minute), Error: "raystep (pid 4242) ended without recording how: killed (SIGKILL), or its machine stopped"}
	w, err := dir.NewLogWriter(reaped.Name, history.DefaultLogCap)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w, "driver of raystep-train-killed-4")
	reaped.Log = w.Close()
	if err := dir.Put(reaped); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&Server{Store: &Store{}, History: idx}).Handler())
	t.Cleanup(srv.Close)
	tab := browser.New(t)
	if err := chromedp.Do(tab.Ctx, chromedp.Navigate(srv.URL+"/history")); err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#history tbody tr")].map((tr) => tr.dataset.name + ": " + tr.querySelector(".status").textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"raystep-train-term-3: cancelled (SIGTERM), job STOPPED", "raystep-eval-bad-2: failed, job FAILED",
		"raystep-train-ok-1: succeeded", "raystep-train-killed-4: reaped by gc"}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("the History view lists %q, want %q", rows, want)
	}
	tab.Shot("history")
	if err := chromedp.Do(tab.Ctx, chromedp.SendKeys(chromedp.CSS(`input[name=status]`), "cancelled\n")); err != nil {
		t.Fatal(err)
	}
	// The form submits by navigating: a poll that meets the navigation
	// starts again on the new page.
	narrowed := `location.search === "?owner=&kind=&status=cancelled&run=&since=" && document.readyState === "complete" &&
		document.querySelectorAll("#history tbody tr").length === 1`
	deadline := time.Now().Add(time.Minute) // only catches a page that never narrows
	for {
		_, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](narrowed, chromedp.WithPollingTimeout(10*time.Second)))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status filter did not narrow the list to the cancelled step: %v", err)
		}
	}
	for _, name := range []string{"raystep-train-ok-1", "raystep-eval-bad-2", "raystep-train-term-3", "raystep-train-killed-4"} {
		if err := chromedp.Do(tab.Ctx, chromedp.Navigate(srv.URL+"/history/"+name+"/")); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[[]string](`[document.getElementById("log").textContent,
			document.querySelector("#utilization tbody tr").textContent, document.querySelector("h2 + table, h2") ? "ok" : ""]`))
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != "driver of "+name+"\n"+map[bool]string{true: "", false: "<script>alert(1)</script>\n"}[name == reaped.Name] {
			t.Errorf("%s's page shows the log %q", name, got[0])
		}
		if wantUtil := name == "raystep-train-ok-1"; wantUtil != (got[1] != "" && got[1][:len("ray-head (head)")] == "ray-head (head)") {
			t.Errorf("%s's page shows the utilization row %q", name, got[1])
		}
		tab.Shot(name)
	}
}
