package raysubmit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/raysubmit"
)

// fakeDashboard serves one job's status, websocket tail and full log the
// way Ray does, and can die and come back on the same address.
type fakeDashboard struct {
	t    *testing.T
	addr string

	mu     sync.Mutex
	srv    *httptest.Server
	kill   chan struct{} // closed when the dashboard dies
	status string
	lines  []string
	hang   bool // status requests get no answer
	busy   bool // status requests are answered 503
}

func newFakeDashboard(t *testing.T, status string, lines ...string) *fakeDashboard {
	d := &fakeDashboard{t: t, addr: "127.0.0.1:0", status: status, lines: lines}
	d.start()
	t.Cleanup(d.die)
	return d
}

// start serves on d.addr (a free port the first time).
func (d *fakeDashboard) start() {
	l, err := net.Listen("tcp", d.addr)
	if err != nil {
		d.t.Fatalf("listen %s: %v", d.addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	srv.Listener = l
	d.mu.Lock()
	d.srv, d.kill, d.addr = srv, make(chan struct{}), l.Addr().String()
	d.mu.Unlock()
	srv.Start()
}

// die closes the listener and every connection: clients are refused.
func (d *fakeDashboard) die() {
	d.mu.Lock()
	srv, kill := d.srv, d.kill
	d.srv = nil
	d.mu.Unlock()
	if srv == nil {
		return
	}
	close(kill)
	srv.CloseClientConnections()
	srv.Close()
}

func (d *fakeDashboard) url() string { return "http://" + d.addr }

func (d *fakeDashboard) set(status string, lines ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status, d.lines = status, lines
}

func (d *fakeDashboard) state() (status, log string, hang, busy bool, kill chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status, strings.Join(d.lines, ""), d.hang, d.busy, d.kill
}

func (d *fakeDashboard) serve(w http.ResponseWriter, r *http.Request) {
	status, log, hang, busy, kill := d.state()
	terminal := raysubmit.Status(status).Terminal()
	switch r.URL.Path {
	case "/api/jobs/job1":
		if busy {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if hang {
			select {
			case <-r.Context().Done():
			case <-kill:
			}
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"status": status})
	case "/api/jobs/job1/logs":
		_ = json.NewEncoder(w).Encode(map[string]string{"logs": log})
	case "/api/jobs/job1/logs/tail":
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		_ = conn.Write(r.Context(), websocket.MessageText, []byte(log))
		if terminal {
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-r.Context().Done():
		case <-kill:
		}
	default:
		http.NotFound(w, r)
	}
}

// outageClient is a client of url with a short outage budget.
func outageClient(t *testing.T, url string, budget time.Duration) *raysubmit.Client {
	c := newClient(t, url)
	c.PollInterval = 50 * time.Millisecond
	c.ReconnectWait = 20 * time.Millisecond
	c.AttemptTimeout = 300 * time.Millisecond
	c.MaxOutage = budget
	return c
}

// follow runs FollowLines in the background; lines and outages arrive on
// channels, the result on done.
type follow struct {
	lines   chan string
	outages chan raysubmit.Outage
	done    chan error
}

func startFollow(t *testing.T, c *raysubmit.Client) *follow {
	f := &follow{lines: make(chan string, 100), outages: make(chan raysubmit.Outage, 1000), done: make(chan error, 1)}
	go func() {
		f.done <- c.FollowLines(ctx(t), "job1", func(l []byte) error { f.lines <- string(l); return nil },
			func(o raysubmit.Outage) { f.outages <- o })
	}()
	return f
}

// await returns the next value of ch, failing the test after a minute.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
		panic("unreachable")
	}
}

// drain returns what ch holds now.
func drain[T any](ch chan T) []T {
	var out []T
	for {
		select {
		case v := <-ch:
			out = append(out, v)
		default:
			return out
		}
	}
}

// TestFollowGivesUpOnDeadDashboard: a dashboard that dies mid-stream is
// reported as an outage after the first refused try, and Follow gives up
// with ErrUnreachable once MaxOutage passed, instead of hanging.
func TestFollowGivesUpOnDeadDashboard(t *testing.T) {
	t.Parallel()
	d := newFakeDashboard(t, "RUNNING", "line 1\n", "line 2\n")
	c := outageClient(t, d.url(), time.Second)
	f := startFollow(t, c)
	got := []string{await(t, f.lines, "line 1"), await(t, f.lines, "line 2")}
	died := time.Now()
	d.die()
	err := await(t, f.done, "end of Follow")
	if !errors.Is(err, raysubmit.ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("FollowLines = %v, want ErrUnreachable with the refused connection", err)
	}
	if !strings.Contains(err.Error(), "dashboard not answering for 1s ("+d.url()+"): get job job1: ") {
		t.Errorf("error %q does not say how long which dashboard did not answer", err)
	}
	if since := time.Since(died); since < time.Second {
		t.Errorf("gave up %s after the dashboard died, before MaxOutage", since)
	}
	outages := drain(f.outages)
	if len(outages) == 0 {
		t.Fatal("no outage reported")
	}
	for i, o := range outages {
		if o.Err == nil || !errors.Is(o.Err, syscall.ECONNREFUSED) || o.Limit != time.Second || i > 0 && o.For < outages[i-1].For {
			t.Errorf("outage %d = %+v, want a refused connection, Limit 1s, For growing", i, o)
		}
	}
	if diff := cmp.Diff([]string{"line 1", "line 2"}, append(got, drain(f.lines)...)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// TestFollowCarriesOnWhenDashboardReturns: a dashboard that comes back
// within the budget ends the outage (a last report with a nil Err), and
// every line arrives exactly once although Ray replays the log.
func TestFollowCarriesOnWhenDashboardReturns(t *testing.T) {
	t.Parallel()
	d := newFakeDashboard(t, "RUNNING", "line 1\n", "line 2\n")
	c := outageClient(t, d.url(), time.Minute)
	f := startFollow(t, c)
	got := []string{await(t, f.lines, "line 1"), await(t, f.lines, "line 2")}
	d.die()
	if o := await(t, f.outages, "outage report"); o.Err == nil {
		t.Fatalf("first outage report %+v, want an error", o)
	}
	d.set("SUCCEEDED", "line 1\n", "line 2\n", "line 3\n", "line 4")
	d.start()
	if err := await(t, f.done, "end of Follow"); err != nil {
		t.Fatalf("FollowLines: %v", err)
	}
	got = append(got, drain(f.lines)...)
	if diff := cmp.Diff([]string{"line 1", "line 2", "line 3", "line 4"}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	outages := drain(f.outages)
	if len(outages) == 0 || outages[len(outages)-1].Err != nil {
		t.Errorf("outage reports after the first %+v, want the last with a nil Err", outages)
	}
}

// TestFollowGivesUpOnHungDashboard: a dashboard whose connections stay
// open but which answers nothing is noticed by the status poll and given
// up on like a dead one.
func TestFollowGivesUpOnHungDashboard(t *testing.T) {
	t.Parallel()
	d := newFakeDashboard(t, "RUNNING", "line 1\n")
	c := outageClient(t, d.url(), time.Second)
	f := startFollow(t, c)
	await(t, f.lines, "line 1")
	d.mu.Lock()
	d.hang = true
	d.mu.Unlock()
	err := await(t, f.done, "end of Follow")
	if !errors.Is(err, raysubmit.ErrUnreachable) || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("FollowLines = %v, want ErrUnreachable after tries with no answer", err)
	}
	if o := await(t, f.outages, "outage report"); !strings.Contains(o.Err.Error(), "no answer within 300ms") {
		t.Errorf("outage %+v, want no answer within 300ms", o)
	}
}

// TestFollowStopsOnCancel: cancelling ends Follow at once, even during an
// outage.
func TestFollowStopsOnCancel(t *testing.T) {
	t.Parallel()
	d := newFakeDashboard(t, "RUNNING", "line 1\n")
	d.die()
	c := outageClient(t, d.url(), time.Hour)
	cctx, cancel := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() {
		done <- c.FollowLines(cctx, "job1", func([]byte) error { return nil }, func(raysubmit.Outage) { cancel() })
	}()
	if err := await(t, done, "end of Follow"); !errors.Is(err, context.Canceled) {
		t.Errorf("FollowLines = %v, want context.Canceled", err)
	}
}

// TestFollowRetriesBusyDashboard: a status answered 503 is a failed try,
// reported as an outage, and Follow carries on once the dashboard answers.
func TestFollowRetriesBusyDashboard(t *testing.T) {
	t.Parallel()
	d := newFakeDashboard(t, "RUNNING", "line 1\n")
	d.mu.Lock()
	d.busy = true
	d.mu.Unlock()
	c := outageClient(t, d.url(), time.Minute)
	f := startFollow(t, c)
	o := await(t, f.outages, "outage report")
	var apiErr *raysubmit.APIError
	if !errors.As(o.Err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("outage %+v, want the 503", o)
	}
	d.mu.Lock()
	d.busy, d.status, d.lines = false, "SUCCEEDED", []string{"line 1\n", "line 2\n"}
	d.mu.Unlock()
	if err := await(t, f.done, "end of Follow"); err != nil {
		t.Fatalf("FollowLines: %v", err)
	}
	if diff := cmp.Diff([]string{"line 1", "line 2"}, drain(f.lines)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
