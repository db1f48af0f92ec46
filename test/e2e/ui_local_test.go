package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/test/browser"
)

// pageWatch is the page of the built `raystep ui` (no kubeconfig: the
// local heads only), open in chromium and watched without a reload while
// a test brings a cluster up and down.
type pageWatch struct {
	tab  *browser.Tab
	base string // the page's URL
}

// watchPage starts `raystep ui` in e's environment, opens its page and
// waits for its live updates.
func (e localEnv) watchPage(t *testing.T) pageWatch {
	t.Helper()
	p := pageWatch{base: e.startUI(t), tab: browser.New(t)}
	ctx, cancel := context.WithTimeout(p.tab.Ctx, 4*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(p.base)); err != nil {
		t.Fatal(err)
	}
	awaitPage(ctx, t, p.tab, "the live updates", `document.getElementById("live").textContent === "Live."`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.raystepMark = "no reload"`)); err != nil {
		t.Fatal(err)
	}
	return p
}

// rowOf is the page expression for the row of the local cluster name.
func rowOf(name string) string {
	return fmt.Sprintf(`document.querySelector('tr[data-key=%q]')`, "interactive/"+ui.LocalNamespace+"/"+name)
}

// awaitUp waits for the row of name, which up brought up as rec: Ready
// and owned by the user. Neither the page nor /api/clusters holds the
// head's token. A screenshot is saved.
func (p pageWatch) awaitUp(t *testing.T, name string, rec localRecord) {
	t.Helper()
	// The page's own waits start now: up may have waited its turn behind
	// other heads' starts.
	ctx, cancel := context.WithTimeout(p.tab.Ctx, 4*time.Minute)
	defer cancel()
	// Columns: Namespace, Name, Kind, Owner, ..., Status (the 9th).
	awaitPage(ctx, t, p.tab, "the row of "+name, fmt.Sprintf(`(() => {
		const tr = %s;
		if (!tr) return false;
		const cells = [...tr.cells].map((td) => td.textContent.trim());
		return cells[1] === %q && cells[2] === "interactive" && cells[3] === "tester" &&
			(cells[8].startsWith(%q) || cells[8].startsWith(%q));
	})()`, rowOf(name), name, ui.StatusReady, ui.StatusRunning))
	p.tab.Shot("up")

	token, err := os.ReadFile(rec.TokenFile)
	if err != nil || strings.TrimSpace(string(token)) == "" {
		t.Fatalf("the head's token file %q: %v (%d bytes)", rec.TokenFile, err, len(token))
	}
	secret := strings.TrimSpace(string(token))
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html, name) {
		t.Errorf("the page's HTML does not name %s", name)
	}
	if strings.Contains(html, secret) {
		t.Errorf("the page's HTML holds the head's token")
	}
	if api := get(t, p.base+"api/clusters"); !strings.Contains(api, `"`+name+`"`) || strings.Contains(api, secret) {
		t.Errorf("/api/clusters must list %s without its token:\n%s", name, api)
	}
}

// awaitDown waits for the row of name to leave the page, which must not
// have been reloaded to drop it. A screenshot is saved.
func (p pageWatch) awaitDown(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.tab.Ctx, 4*time.Minute)
	defer cancel()
	awaitPage(ctx, t, p.tab, "the row of "+name+" to go", "!"+rowOf(name))
	mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.raystepMark || "reloaded"`))
	if err != nil {
		t.Fatal(err)
	}
	if mark != "no reload" {
		t.Errorf("the page was reloaded to drop the row (mark %q)", mark)
	}
	p.tab.Shot("down")
}

// startUI starts the built `raystep ui` on a free port in the test's
// environment and returns its page's URL; the test's end kills it.
func (e localEnv) startUI(t *testing.T) string {
	t.Helper()
	return startUIWith(t, e.bin, e.env())
}

// startUIWith starts bin's `raystep ui` on a free port with env and
// returns its page's URL; the test's end kills it.
func startUIWith(t *testing.T, bin string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "ui", "--addr", "127.0.0.1:0")
	cmd.Env, cmd.Dir = env, t.TempDir()
	out, errOut := newWatchBuffer(), &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		t.Logf("raystep ui's stderr:\n%s", errOut.String())
	})
	pageURL := regexp.MustCompile(`raystep ui: (http://127\.0\.0\.1:\d+/)\n`)
	deadline := time.After(time.Minute)
	for {
		grew := out.changed()
		if m := pageURL.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case <-grew:
		case err := <-done:
			t.Fatalf("raystep ui exited (%v) before it printed its URL\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("raystep ui printed no URL within a minute\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
	}
}

// awaitPage waits until the page expression is true, evaluated every
// 100 ms (the local records are read again as their files change); it
// fails the test with a screenshot when ctx ends first.
func awaitPage(ctx context.Context, t *testing.T, tab *browser.Tab, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(0))); err != nil {
		tab.Shot("waiting-for-" + strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("waiting for %s in the page: %v", what, err)
	}
}

// get returns the body of url, which must answer 200.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}

// TestLocalUIListsARunningStep opens the built `raystep ui` in chromium
// while the built `raystep run` runs a step on a private head of this
// machine: the step's row appears with its kind, owner and Running, turns
// Succeeded once its job ended and goes once its head is gone, all
// without a reload; `ls -o json` lists it meanwhile. A screenshot of the
// running step is saved.
func TestLocalUIListsARunningStep(t *testing.T) {
	t.Parallel()
	e := newLocalEnv(t)
	base := e.startUI(t)
	tab := browser.New(t)
	ctx, cancel := context.WithTimeout(tab.Ctx, 12*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(base)); err != nil {
		t.Fatal(err)
	}
	awaitPage(ctx, t, tab, "the live updates", `document.getElementById("live").textContent === "Live."`)
	// Every status each row shows, kept in the page as the rows redraw.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.raystepMark = "no reload";
		window.seen = {};
		const look = () => {
			for (const tr of document.querySelectorAll("#clusters tbody tr")) {
				const s = (window.seen[tr.dataset.key] ||= []);
				const text = tr.querySelector(".status").firstChild.textContent.trim();
				if (s[s.length - 1] !== text) s.push(text);
			}
		};
		new MutationObserver(look).observe(document.querySelector("#clusters tbody"), {childList: true, subtree: true, characterData: true});
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}

	gate := filepath.Join(t.TempDir(), "gate")
	spec := filepath.Join(t.TempDir(), "step.yaml")
	// A provision timeout for a busy machine: the head may wait its turn.
	if err := os.WriteFile(spec, fmt.Appendf(nil, `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: uistep, owner: tester}
spec:
  kind: train
  entrypoint: %q
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0-py311"}
  timeouts: {provision: 8m, run: 10m}
`, `python -c "import os, time; print('waiting for the gate', flush=True); `+
		`[time.sleep(0.05) for _ in iter(lambda: os.path.exists('`+gate+`'), True)]; print('through')"`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, "run", "-f", spec)
	cmd.Env, cmd.Dir = e.env(), t.TempDir()
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = os.WriteFile(gate, nil, 0o644)
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("raystep run's stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
	})

	const stepRow = `[...document.querySelectorAll("#clusters tbody tr")].find((tr) => tr.dataset.key.startsWith("step/` + ui.LocalNamespace + `/"))`
	awaitPage(ctx, t, tab, "the running step", `(() => {
		const tr = `+stepRow+`;
		if (!tr) return false;
		const cells = [...tr.cells].map((td) => td.textContent.trim());
		return cells[1].includes("uistep") && cells[2] === "step (train)" && cells[3] === "tester" && cells[8].startsWith("Running");
	})()`)
	tab.Shot("running-step")
	key, err := chromedp.Run(ctx, chromedp.Evaluate[string](stepRow+`.dataset.key`))
	if err != nil {
		t.Fatal(err)
	}
	rows := e.ls(t)
	if len(rows) != 1 || rows[0].ClusterKind != "step" || rows[0].Owner != "tester" || "step/"+ui.LocalNamespace+"/"+rows[0].Name != key {
		t.Errorf("ls -o json = %+v, want the running step %s", rows, key)
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	awaitPage(ctx, t, tab, "the step's row to go", "!"+stepRow)
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil || !strings.Contains(out.String(), "through") {
			t.Fatalf("raystep run: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("raystep run did not end after its row went")
	}
	seen, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`window.seen[%q] || []`, key)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the step's row showed, in order: %q", seen)
	if len(seen) == 0 || seen[len(seen)-1] != ui.StatusSucceeded {
		t.Errorf("the step's row showed %q, want it to end Succeeded", seen)
	}
	mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.raystepMark || "reloaded"`))
	if err != nil || mark != "no reload" {
		t.Errorf("the page was reloaded (mark %q, %v)", mark, err)
	}
}
