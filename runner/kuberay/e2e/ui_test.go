package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
	"github.com/raystep/raystep/test/browser"
	"github.com/raystep/raystep/test/cluster"
)

// recordJS keeps, in the page, every status and reason each row has
// shown (window.seen[key]) as the live updates redraw the table, and
// marks the document so a reload would show (window.loadedOnce).
const recordJS = `(() => {
  window.loadedOnce = true;
  window.seen = {};
  const look = () => {
    for (const tr of document.querySelectorAll("#clusters tbody tr")) {
      const td = tr.querySelector(".status");
      const s = (window.seen[tr.dataset.key] ||= []);
      const text = td ? td.innerText.replace(/\s+/g, " ").trim() : "";
      if (s[s.length - 1] !== text) s.push(text);
    }
  };
  look();
  new MutationObserver(look).observe(document.querySelector("#clusters tbody"), {childList: true, subtree: true, characterData: true});
  return true;
})()`

// TestUIListInBrowser opens `raystep ui`'s page in chromium against the
// real API server, KubeRay operator and Kueue, and watches it without a
// reload: a running step appears with its GPU type, owner and status; a
// step Kueue holds shows Queued and why; a cluster whose head image does
// not pull shows Failing with ImagePullBackOff; the running step turns Succeeded and
// its row goes once the runner has torn it down, and so does the queued
// one's after it ran. Screenshots of each state are saved.
func TestUIListInBrowser(t *testing.T) {
	t.Parallel()
	setupKueue(t)
	ns := namespace(t, "e2e-ui")
	oneGPUQueue(t, ns)
	base := serveUI(t, ns)

	tab := browser.New(t)
	if err := chromedp.Do(tab.Ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	await(t, tab, "the live updates", `document.getElementById("live").textContent === "Live."`)
	if _, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[bool](recordJS)); err != nil {
		t.Fatal(err)
	}

	release := filepath.Join(t.TempDir(), "release")
	hold := `python -c "import os,time; [time.sleep(0.1) for _ in iter(lambda: os.path.exists('` + release + `'), True)]; print('first done')"`
	first := startQueued(t, ns, "first", hold)
	firstKey := "step/" + ns + "/" + runner.Resolve(first.step, nil).ID
	first.ev.await(t, "submitted")
	await(t, tab, "the running step's row", rowJS(firstKey, fmt.Sprintf(`
		cells[1] === %q && cells[2] === "step (train)" && cells[3] === "raystep-e2e" && cells[6] === "a100-80gb × 1" &&
		tr.querySelector(".status").textContent.startsWith("Running")`, runner.Resolve(first.step, nil).ID)))
	tab.Shot("running")

	pull := `Back-off pulling image "rayproject/ray:2.60.0-py311": not found`
	failing := startPullBackOff(t, ns, pull)
	failingKey := "step/" + ns + "/" + failing
	await(t, tab, "the failing cluster's status and reason", rowJS(failingKey, `
		tr.querySelector(".status").textContent.startsWith("Failing") &&
		tr.querySelector(".reason") && tr.querySelector(".reason").textContent.includes("ImagePullBackOff: container ray-head: Back-off pulling")`))

	second := startQueued(t, ns, "second", `python -c "print('second done')"`)
	secondKey := "step/" + ns + "/" + runner.Resolve(second.step, nil).ID
	await(t, tab, "the queued step's reason", rowJS(secondKey, `
		tr.querySelector(".status").innerText.includes("Queued") && tr.querySelector(".reason") &&
		tr.querySelector(".reason").textContent.includes("LocalQueue gpu")`))

	tab.Shot("queued-and-failing")

	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		step *queuedStep
		key  string
	}{{first, firstKey}, {second, secondKey}} {
		if err := q.step.wait(t); err != nil {
			t.Fatalf("%s step: %v", q.step.name, err)
		}
		await(t, tab, q.step.name+"'s row to go", fmt.Sprintf(`!document.querySelector('tr[data-key=%q]')`, q.key))
		seen, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`window.seen[%q] || []`, q.key)))
		if err != nil {
			t.Fatal(err)
		}
		if !containsPrefix(seen, ui.StatusSucceeded) {
			t.Errorf("%s's row showed %q, never %s", q.step.name, seen, ui.StatusSucceeded)
		}
		t.Logf("%s's row showed, in order: %q", q.step.name, seen)
	}
	if again, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[bool](`window.loadedOnce === true`)); err != nil || !again {
		t.Errorf("the page was reloaded (%v): the rows must change live", err)
	}
	tab.Shot("after-teardown")
	nothingLeftBut(t, ns, failing)
}

// serveUI serves the UI's page for ns from its own watches, as `raystep
// ui -n NS` does, and returns its URL.
func serveUI(t *testing.T, ns string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store := &ui.Store{}
	own := kubeapitest.New(t, shared.k8s.Config) // raystep ui's own clients
	if err := store.Watch(ctx, own, own, ns); err != nil {
		cancel()
		t.Fatal(err)
	}
	srv := httptest.NewServer((&ui.Server{Store: store, Scope: "namespace " + ns}).Handler())
	t.Cleanup(func() {
		cancel() // first: ends the event streams, which srv.Close waits for
		srv.Close()
	})
	return srv.URL
}

// rowJS is a page expression true once the row of key exists and cond
// holds of it (tr, and cells: its cells' text).
func rowJS(key, cond string) string {
	return fmt.Sprintf(`(() => {
		const tr = document.querySelector('tr[data-key=%q]');
		if (!tr) return false;
		const cells = [...tr.cells].map((td) => td.textContent.trim());
		return !!(%s);
	})()`, key, cond)
}

// await waits until the page expression is true, screenshotting the page
// and failing the test if it is not within 3 minutes (a bound that only
// catches a hang: the page is watched as it changes).
func await(t *testing.T, tab *browser.Tab, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](expr, chromedp.WithPollingMutation(),
		chromedp.WithPollingTimeout(3*time.Minute))); err != nil {
		tab.Shot("waiting-for-" + strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("waiting for %s in the page: %v", what, err)
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// startPullBackOff runs a step whose head image never pulls (kwok holds
// the pod waiting with reason ImagePullBackOff and msg) and which keeps
// its cluster on failure, so the row stays; the cluster is deleted at
// cleanup. It returns the RayJob's name.
func startPullBackOff(t *testing.T, ns, msg string) string {
	t.Helper()
	b := backend(t, spec(t, "spec.teardown=on_success"), ns, nil, nil)
	b.Customize = func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec.HeadGroupSpec.Template.Annotations = cluster.PodWaitingAnnotations("ImagePullBackOff", msg)
	}
	s := step(b.Spec, runID(t)+"-pull")
	name := runner.Resolve(s, nil).ID
	done := make(chan error, 1)
	go func() {
		_, err := newRunner(t, b).Run(t.Context(), s)
		done <- err
	}()
	t.Cleanup(func() {
		if err := <-done; err == nil {
			t.Errorf("the step whose image does not pull succeeded")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		job := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := shared.k8s.Client.Delete(ctx, job); err != nil {
			t.Errorf("delete RayJob %s: %v", name, err)
		}
	})
	return name
}

// nothingLeftBut fails the test if anything of the steps is left in ns,
// apart from the objects of the RayJob named keep.
func nothingLeftBut(t *testing.T, ns, keep string) {
	t.Helper()
	for left := range strings.SplitSeq(leftovers(t.Context(), ns), ", ") {
		if left != "" && !strings.Contains(left, keep) {
			t.Errorf("left behind in %s: %s", ns, left)
		}
	}
}
