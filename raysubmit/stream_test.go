package raysubmit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/raystep/raystep/raysubmit"
)

// lineChecker checks that a job log holds exactly n numbered lines after
// Ray's preamble, in order, each once.
type lineChecker struct {
	n        int
	started  bool
	next     int
	problems []string
}

func (lc *lineChecker) line(l []byte) error {
	s := string(l)
	if rayLine(s) {
		lc.started = lc.started || strings.HasPrefix(s, "Running entrypoint for job ")
		return nil
	}
	lc.next++
	if want := fmt.Sprintf("line %07d", lc.next); s != want && len(lc.problems) < 5 {
		lc.problems = append(lc.problems, fmt.Sprintf("line %d: got %q, want %q", lc.next, s, want))
	}
	return nil
}

func (lc *lineChecker) check(t *testing.T, name string) {
	t.Helper()
	if !lc.started {
		t.Errorf("%s: never saw the entrypoint line", name)
	}
	if lc.next != lc.n {
		t.Errorf("%s: got %d lines, want %d", name, lc.next, lc.n)
	}
	for _, p := range lc.problems {
		t.Errorf("%s: %s", name, p)
	}
}

// TestFollow100kLines follows one job that prints 100,000 numbered lines
// three ways at once: straight from the head, through a proxy that cuts
// the websocket twice mid-stream, and through one whose first handshake
// fails. Every follower must see every line exactly once, in order.
func TestFollow100kLines(t *testing.T) {
	t.Parallel()
	const n = 100_000
	c := headClient(t)
	head := ray.Head(t).DashboardURL()
	id := submit(t, c, raysubmit.SubmitRequest{
		Entrypoint: fmt.Sprintf("python lines.py %d 0 6", n), // over ~6s: followers tail it live
		RuntimeEnv: map[string]any{"working_dir": jobsDir(t, c)},
	})
	cutter := newFaultProxy(t, head, nil, 200_000, 700_000)
	var handshakes atomic.Int32
	refuser := newFaultProxy(t, head, func(r *http.Request) fault {
		if strings.HasSuffix(r.URL.Path, "/logs/tail") && handshakes.Add(1) == 1 {
			return reply503
		}
		return pass
	})
	followers := []struct {
		name string
		url  string
	}{
		{name: "direct", url: head},
		{name: "websocket cut twice", url: cutter.URL()},
		{name: "first handshake refused", url: refuser.URL()},
	}
	var wg sync.WaitGroup
	checkers := make([]*lineChecker, len(followers))
	errs := make([]error, len(followers))
	for i, f := range followers {
		checkers[i] = &lineChecker{n: n}
		fc := newClient(t, f.url)
		wg.Go(func() { errs[i] = fc.FollowLines(ctx(t), id, checkers[i].line, nil) })
	}
	wg.Wait()
	for i, f := range followers {
		if errs[i] != nil {
			t.Errorf("%s: FollowLines: %v", f.name, errs[i])
		}
		checkers[i].check(t, f.name)
	}
	if got := strings.Count(strings.Join(cutter.Events(), "\n"), "cut websocket"); got != 2 {
		t.Errorf("proxy cut the websocket %d times, want 2 (events %q)", got, cutter.Events())
	}
	if d, err := c.Wait(ctx(t), id); err != nil || d.Status != raysubmit.StatusSucceeded {
		t.Errorf("Wait = %+v, %v; want SUCCEEDED", d, err)
	}
}

// TestRetriesThroughFaults runs a job's whole life through a proxy that
// answers 503 in bursts and resets connections, including one reset after
// the submission reached Ray: the job must exist once and end SUCCEEDED.
func TestRetriesThroughFaults(t *testing.T) {
	t.Parallel()
	c := headClient(t)
	marker := fmt.Sprintf("faults-%p", t)
	var calls sync.Map // "METHOD path-kind" -> *atomic.Int32
	plan := func(r *http.Request) fault {
		kind := r.Method + " " + pathKind(r.URL.Path)
		v, _ := calls.LoadOrStore(kind, new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		switch kind {
		case "POST submit":
			if n == 1 {
				return resetAfter // Ray took the job, the client never heard
			}
		case "GET job":
			switch n {
			case 1, 2, 3:
				return reply503
			case 4:
				return resetFirst
			}
		case "GET logs":
			if n == 1 {
				return resetFirst
			}
		}
		return pass
	}
	p := newFaultProxy(t, ray.Head(t).DashboardURL(), plan)
	pc := newClient(t, p.URL())
	resp, err := pc.Submit(ctx(t), raysubmit.SubmitRequest{Entrypoint: fmt.Sprintf(`python -c "print('%s')"`, marker)})
	if err != nil {
		t.Fatalf("Submit through faults: %v", err)
	}
	t.Cleanup(func() { _, _ = c.Stop(context.Background(), resp.SubmissionID) })
	d, err := pc.Wait(ctx(t), resp.SubmissionID)
	if err != nil || d.Status != raysubmit.StatusSucceeded {
		t.Fatalf("Wait through faults = %+v, %v; want SUCCEEDED", d, err)
	}
	logs, err := pc.Logs(ctx(t), resp.SubmissionID)
	if err != nil || !strings.Contains(logs, marker+"\n") {
		t.Errorf("Logs through faults = %q, %v; want the marker line", logs, err)
	}
	jobs, err := c.List(ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	count := 0
	for _, j := range jobs {
		if strings.Contains(j.Entrypoint, marker) {
			count++
		}
	}
	if count != 1 {
		t.Errorf("jobs with marker %s: %d, want exactly 1 (faults %q)", marker, count, p.Events())
	}
}

// TestRetryGivesUp checks that a dashboard that keeps failing yields an
// APIError carrying the last status, not a hang.
func TestRetryGivesUp(t *testing.T) {
	t.Parallel()
	p := newFaultProxy(t, "http://127.0.0.1:1", func(*http.Request) fault { return reply503 })
	c := newClient(t, p.URL())
	c.HTTP.RetryMax = 2
	_, err := c.Version(ctx(t))
	var apiErr *raysubmit.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Version = %v, want an APIError with 503", err)
	}
	if got := len(p.Events()); got != 3 {
		t.Errorf("attempts = %d, want 3", got)
	}
}

func pathKind(p string) string {
	switch {
	case p == "/api/jobs/":
		return "submit"
	case strings.HasSuffix(p, "/logs/tail"):
		return "tail"
	case strings.HasSuffix(p, "/logs"):
		return "logs"
	case strings.HasPrefix(p, "/api/jobs/"):
		return "job"
	}
	return p
}
