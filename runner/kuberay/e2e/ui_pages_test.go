package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/test/browser"
)

// TestUIStepPagesInBrowser opens the built `raystep ui` in chromium on
// the KubeRay test environment, with two steps in its namespace. The
// running step's row on the list leads to its cluster page, which lists
// its Ray job RUNNING; the job's log link leads to a page that shows the
// lines the job printed and then, without a reload, the lines it prints
// later, in order. A step whose head image does not pull leads to a page
// that shows its head pod with ImagePullBackOff and Kubernetes' message.
// Screenshots of the three pages are saved.
func TestUIStepPagesInBrowser(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-ui-pages")
	entrypoint, gate, end := numberedDriver(t, 3)
	s := newDagsterStep(t, bin, ns, "spec.entrypoint="+entrypoint)
	p := s.start(t)
	t.Cleanup(func() { // also when the test failed: the job ends, and the step tears its cluster down
		for _, f := range []string{gate, end} {
			_ = os.WriteFile(f, nil, 0o644)
		}
		select {
		case <-p.done:
		case <-time.After(4 * time.Minute):
		}
	})
	pull := `Back-off pulling image "rayproject/ray:2.60.0-py311": manifest unknown`
	failing := startPullBackOff(t, ns, pull)

	ui := startHolder(t, interactiveEnv(t), "ui", "-n", ns, "--addr", "127.0.0.1:0")
	base := strings.TrimSuffix(strings.TrimPrefix(ui.url, "raystep ui: "), "/")
	ui.url = base // stop checks that its port is closed
	tab := browser.New(t)

	// The list, live, links the step's row to its cluster page.
	openFromList(t, tab, base, "/clusters/"+ns+"/"+s.id+"/")
	await(t, tab, "the step's Ray job RUNNING on its page", jobRowJS(s.id, `tr.cells[1].textContent === "RUNNING"`))
	tab.Shot("step-cluster-page")
	follow(t, tab, fmt.Sprintf(`#jobs a[href=%q]`, "jobs/"+url.PathEscape(s.id)+"/"))
	await(t, tab, "the job's third line", logHasJS("numbered 0003"))
	if _, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[string](`window.raystepMark = "no reload"`)); err != nil {
		t.Fatal(err)
	}
	if early, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[bool](logHasJS("numbered 0004"))); err != nil || early {
		t.Fatalf("the page shows the fourth line before the job printed it (%v)", err)
	}
	touch(t, gate)
	await(t, tab, "the job's sixth line", logHasJS("numbered 0006"))
	tab.Shot("job-log-live")
	got, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[[]string](`document.getElementById("log").textContent.split("\n").filter((l) => l.startsWith("numbered "))`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"numbered 0001", "numbered 0002", "numbered 0003", "numbered 0004", "numbered 0005", "numbered 0006"}; !slices.Equal(got, want) {
		t.Errorf("the log page shows %q, want %q", got, want)
	}
	if mark, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[string](`window.raystepMark || "reloaded"`)); err != nil || mark != "no reload" {
		t.Errorf("the log page was reloaded to show the later lines (mark %q, %v)", mark, err)
	}

	// The failing step's page shows why its head pod does not run.
	openFromList(t, tab, base, "/clusters/"+ns+"/"+failing+"/")
	await(t, tab, "the failing head pod's problem", fmt.Sprintf(`[...document.querySelectorAll("#pods tbody tr")].some((tr) =>
		tr.cells.length === 7 && tr.cells[0].textContent.includes("-head-") && tr.cells[1].textContent === "head" &&
		tr.cells[6].querySelector("strong") && tr.cells[6].querySelector("strong").textContent === "ImagePullBackOff" &&
		tr.cells[6].textContent.includes(%q))`, pull))
	tab.Shot("failing-cluster-page")

	touch(t, end)
	if code := p.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("the step exited %d, want 0:\n%s", code, p.out.String())
	}
	ui.stop(t, syscall.SIGTERM)
	nothingLeftBut(t, ns, failing)
}

// openFromList opens the list page at base and, once the live list links
// to the cluster page path, follows that link.
func openFromList(t *testing.T, tab *browser.Tab, base, path string) {
	t.Helper()
	if err := chromedp.Do(tab.Ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf(`#clusters a[href=%q]`, path)
	await(t, tab, "the list's link to "+path, fmt.Sprintf(`!!document.querySelector(%q)`, link))
	follow(t, tab, link)
	if got, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[string](`location.pathname`)); err != nil || got != path {
		t.Fatalf("the list's link led to %q (%v), want %s", got, err, path)
	}
}

// follow goes where the link selector finds points, as a click on it
// would, and waits for that page's live updates. (The href is read and
// loaded in two steps: a click would navigate while the test polls the
// old page.)
func follow(t *testing.T, tab *browser.Tab, selector string) {
	t.Helper()
	href, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).href || ""`, selector)))
	if err != nil || href == "" {
		t.Fatalf("no link %s in the page (%v)", selector, err)
	}
	if err := chromedp.Do(tab.Ctx, chromedp.Navigate(href)); err != nil {
		t.Fatalf("open %s: %v", href, err)
	}
	await(t, tab, "the live updates of "+href, `document.getElementById("live").textContent === "Live."`)
}

// jobRowJS is a page expression true once the cluster page's jobs table
// has the row of Ray job id and cond holds of it (tr).
func jobRowJS(id, cond string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#jobs tbody tr")].some((tr) => tr.cells.length === 7 && tr.cells[0].textContent === %q && (%s))`, id, cond)
}

// logHasJS is a page expression true once the log page shows line.
func logHasJS(line string) string {
	return fmt.Sprintf(`document.getElementById("log").textContent.split("\n").includes(%q)`, line)
}

// TestUIDashboardProxyTokenAuth runs the built `raystep ui` on a step
// under Ray token auth whose head pod's dashboard is the token head (which
// refuses a request without the token). Through a port-forward of its
// own, with the token it read from the step's Secret, the UI lists the
// step's Ray job on its cluster page, streams the job's log, and its
// dashboard proxy answers api/jobs/ with the token head's job list; the
// token appears in no header or body of anything the UI served, nor in
// its output.
func TestUIDashboardProxyTokenAuth(t *testing.T) {
	t.Parallel()
	setup(t)
	head := tokenRay.Head(t)
	buildRaystep(t)
	ns := namespace(t, "e2e-ui-token")
	relayAddr := shared.tokenDashboard.Addr().String()
	relayed := relay(t, shared.tokenDashboard, head.DashboardURL())
	hc := &http.Client{Timeout: time.Minute}
	if code, _, _ := fetch(t, hc, "http://"+relayAddr+"/api/jobs/"); code != http.StatusUnauthorized {
		t.Fatalf("the token head answered %d to a request without the token, want 401", code)
	}

	release := t.TempDir() + "/release"
	s := spec(t, fmt.Sprintf(`spec.entrypoint=python -c "import os, time; print('token job started', flush=True); `+
		`[time.sleep(0.05) for _ in iter(lambda: os.path.exists('%s'), True)]; print('released')"`, release))
	b := backend(t, s, ns, nil, nil)
	b.Profile = tokenProfile(shared.profile)
	b.Dashboard = kuberay.DashboardOptions{URL: head.DashboardURL(), Token: head.Token()}
	key, value := tokenLabel(t, head)
	b.Customize = func(j *rayv1.RayJob) {
		j.Labels[key] = value
		// The head pod's dashboard port is the one kwok sends to the relay.
		c := &j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "dashboard", ContainerPort: int32(tokenDashboardPort())})
	}
	st := runner.Resolve(step(b.Spec, runID(t)), nil)
	run := startStep(t.Context(), newRunner(t, b), st)
	job := awaitJobStatus(t, ns, st.ID, rayv1.JobStatusRunning, run.done)
	if port := kuberay.DashboardPort(rayCluster(t, ns, job.Status.RayClusterName)); int(port) != tokenDashboardPort() {
		t.Fatalf("the RayCluster's dashboard port is %d, want %d (the relay's)", port, tokenDashboardPort())
	}

	ui := startHolder(t, interactiveEnv(t), "ui", "-n", ns, "--addr", "127.0.0.1:0")
	base := strings.TrimSuffix(strings.TrimPrefix(ui.url, "raystep ui: "), "/")
	ui.url = base
	page := base + "/clusters/" + ns + "/" + st.ID + "/"
	served := map[string]string{} // what the UI answered, headers and body, by URL
	keep := func(u string, h http.Header, body string) {
		var b strings.Builder
		_ = h.Write(&b)
		served[u] = b.String() + "\n" + body
	}

	// The cluster page's stream says the job is there once the UI has
	// reached the head; then the page itself lists it.
	_, h, events := readEvents(t, page+"events", func(event, data string) bool {
		return event == "jobs" && strings.Contains(data, `"id":"`+st.ID+`"`)
	})
	keep(page+"events", h, events)
	_, h, logEvents := readEvents(t, page+"jobs/"+st.ID+"/events", func(event, data string) bool {
		return event == "lines" && strings.Contains(data, "token job started")
	})
	keep(page+"jobs/"+st.ID+"/events", h, logEvents)

	for _, u := range []string{base + "/", base + "/api/clusters", page, page + "jobs/" + st.ID + "/", page + "jobs/" + st.ID + "/logs.txt",
		page + "dashboard/", page + "dashboard/api/version", page + "dashboard/api/jobs/" + st.ID} {
		code, h, body := fetch(t, hc, u)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200:\n%s", u, code, body)
		}
		keep(u, h, body)
	}
	if !strings.Contains(served[page], st.ID) || !strings.Contains(served[base+"/api/clusters"], st.ID) {
		t.Errorf("the cluster page or /api/clusters lacks the step %s:\n%s\n%s", st.ID, served[page], served[base+"/api/clusters"])
	}
	if !strings.Contains(served[page+"jobs/"+st.ID+"/logs.txt"], "token job started") {
		t.Errorf("logs.txt lacks the job's line:\n%s", served[page+"jobs/"+st.ID+"/logs.txt"])
	}

	jobsURL := page + "dashboard/api/jobs/"
	code, h, body := fetch(t, hc, jobsURL)
	keep(jobsURL, h, body)
	var jobs []raysubmit.JobDetails
	if code != http.StatusOK || json.Unmarshal([]byte(body), &jobs) != nil {
		t.Fatalf("GET %s: %d %s; want the token head's job list", jobsURL, code, body)
	}
	found := false
	for _, j := range jobs {
		found = found || j.SubmissionID == st.ID && j.Status == raysubmit.StatusRunning
	}
	if !found {
		t.Errorf("GET %s lists no RUNNING job %s: the proxy did not reach the token head:\n%s", jobsURL, st.ID, body)
	}
	if relayed.Load() == 0 {
		t.Errorf("nothing came through the relay at %s: the UI did not reach the head pod's dashboard port", relayAddr)
	}

	touch(t, release)
	run.wait(t)
	if run.err != nil || run.res.Job.Status != runner.StatusSucceeded {
		t.Fatalf("step = %s, %v; want SUCCEEDED", run.res.Job.Status, run.err)
	}
	ui.stop(t, syscall.SIGTERM)
	served["raystep ui's output"] = ui.stderr.String()
	for where, text := range served {
		if strings.Contains(text, head.Token()) {
			t.Errorf("the token appears in %s", where)
		}
	}
	awaitSecretGone(t, ns, kuberay.AuthSecretName(st.ID))
	nothingLeft(t, ns)
}

// fetch GETs u and returns the status, the headers and the body.
func fetch(t *testing.T, hc *http.Client, u string) (int, http.Header, string) {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read the body: %v", u, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// readEvents reads the server-sent events of u until until holds of one,
// and returns the status, the headers and all that was read; it fails the
// test if the stream ends first or after a bound that only catches a hang.
func readEvents(t *testing.T, u string, until func(event, data string) bool) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	var all strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line + "\n")
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok && until(event, v) {
			return resp.StatusCode, resp.Header, all.String()
		}
	}
	t.Fatalf("GET %s: the stream ended (%v) before the event waited for:\n%s", u, sc.Err(), all.String())
	return 0, nil, ""
}

// relay relays every connection ln accepts to the dashboard at target
// until the test ends, when it stops accepting (ln stays open: it is the
// environment's) and closes the connections it relayed; it returns their
// count.
func relay(t *testing.T, ln *net.TCPListener, target string) *atomic.Int64 {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var (
		count   atomic.Int64
		mu      sync.Mutex
		open    = map[net.Conn]bool{}
		wg      sync.WaitGroup
		stopped = make(chan struct{})
	)
	wg.Add(1)
	t.Cleanup(func() {
		close(stopped)
		_ = ln.SetDeadline(time.Now()) // ends the Accept
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		_ = ln.SetDeadline(time.Time{})
	})
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			select {
			case <-stopped:
				if err == nil {
					in.Close()
				}
				return
			default:
			}
			if err != nil {
				t.Errorf("the relay to %s stopped accepting: %v", target, err)
				return
			}
			count.Add(1)
			mu.Lock()
			open[in] = true
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				relayConn(in, u.Host)
				mu.Lock()
				delete(open, in)
				mu.Unlock()
			}()
		}
	}()
	return &count
}
