package raysubmit_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/raysubmit"
)

// droppingTail is a job whose log tail breaks, as a restarted proxy breaks
// it, after cuts[n] bytes of its n-th connection, in the middle of a line;
// like Ray's, every connection replays the log from its first byte, in
// frames of a few bytes. The connection after the last cut delivers the
// whole log and ends normally, and the job is SUCCEEDED from then on.
type droppingTail struct {
	log   string
	cuts  []int
	conns atomic.Int32
	done  atomic.Bool
}

func (d *droppingTail) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/jobs/job1":
		status := "RUNNING"
		if d.done.Load() {
			status = "SUCCEEDED"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"status": status})
	case "/api/jobs/job1/logs":
		_ = json.NewEncoder(w).Encode(map[string]string{"logs": d.log})
	case "/api/jobs/job1/logs/tail":
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		n := int(d.conns.Add(1)) - 1
		end := len(d.log)
		if n < len(d.cuts) {
			end = d.cuts[n]
		} else {
			d.done.Store(true)
		}
		for i := 0; i < end; i += 5 {
			if conn.Write(r.Context(), websocket.MessageText, []byte(d.log[i:min(i+5, end)])) != nil {
				return
			}
		}
		if n >= len(d.cuts) {
			_ = conn.Close(websocket.StatusNormalClosure, "")
		}
		// else CloseNow: the stream breaks without a close frame
	default:
		http.NotFound(w, r)
	}
}

// TestFollowResumesAtTheByteItReached: each time the tail breaks mid-line,
// Follow reconnects and skips what it delivered, so every line arrives
// once and whole, and a broken stream is not reported as an outage.
func TestFollowResumesAtTheByteItReached(t *testing.T) {
	t.Parallel()
	const log = "line 1\nline 2\nline 3 is a longer one\nline 4\n"
	tests := []struct {
		name string
		cuts []int
	}{
		{"one break mid-line", []int{10}},
		{"a break that brings nothing new", []int{10, 10}},
		{"breaks further on", []int{3, 17, 30}},
		{"a break right after a newline", []int{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &droppingTail{log: log, cuts: tt.cuts}
			srv := httptest.NewServer(http.HandlerFunc(d.serve))
			t.Cleanup(srv.Close)
			c := outageClient(t, srv.URL, time.Minute)
			var lines []string
			var outages []raysubmit.Outage
			err := c.FollowLines(ctx(t), "job1", func(l []byte) error { lines = append(lines, string(l)); return nil },
				func(o raysubmit.Outage) { outages = append(outages, o) })
			if err != nil {
				t.Fatalf("FollowLines: %v", err)
			}
			want := []string{"line 1", "line 2", "line 3 is a longer one", "line 4"}
			if diff := cmp.Diff(want, lines); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if got, want := d.conns.Load(), int32(len(tt.cuts)+1); got != want {
				t.Errorf("tail connections = %d, want %d", got, want)
			}
			if len(outages) != 0 {
				t.Errorf("outages %+v, want none: the dashboard answered throughout", outages)
			}
		})
	}
}

// busyStatus answers a job's status 503 to its first busy requests (or
// always, with busy < 0), then SUCCEEDED; its log is one line.
type busyStatus struct {
	busy     int32
	requests atomic.Int32
}

func (b *busyStatus) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/jobs/job1":
		if n := b.requests.Add(1); b.busy < 0 || n <= b.busy {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "SUCCEEDED"})
	case "/api/jobs/job1/logs":
		_ = json.NewEncoder(w).Encode(map[string]string{"logs": "done\n"})
	default:
		http.NotFound(w, r)
	}
}

// TestFollowReportsAnOutageAndItsEnd: each failed try is reported with
// how long the outage lasts and its limit, and the dashboard's first
// answer ends it with exactly one report without an error.
func TestFollowReportsAnOutageAndItsEnd(t *testing.T) {
	t.Parallel()
	b := &busyStatus{busy: 3}
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	c := outageClient(t, srv.URL, time.Minute)
	var mu sync.Mutex
	var outages []raysubmit.Outage
	var log strings.Builder
	_, err := c.Follow(ctx(t), "job1", &log, func(o raysubmit.Outage) {
		mu.Lock()
		defer mu.Unlock()
		outages = append(outages, o)
	})
	if err != nil || log.String() != "done\n" {
		t.Fatalf("Follow = %q, %v; want the log", log.String(), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(outages) != 4 {
		t.Fatalf("outage reports %+v, want 3 failures and their end", outages)
	}
	for i, o := range outages {
		var apiErr *raysubmit.APIError
		failed := errors.As(o.Err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable
		switch {
		case o.Limit != time.Minute:
			t.Errorf("report %d: Limit %s, want MaxOutage (1m)", i, o.Limit)
		case i > 0 && o.For < outages[i-1].For:
			t.Errorf("report %d: For %s went back from %s", i, o.For, outages[i-1].For)
		case i < 3 && !failed:
			t.Errorf("report %d: Err %v, want the 503", i, o.Err)
		case i == 3 && o.Err != nil:
			t.Errorf("last report: Err %v, want nil: the dashboard answered", o.Err)
		}
	}
}

// TestFollowGivesUpOnABusyDashboard: a dashboard that answers nothing but
// 503 ends Follow with ErrUnreachable and the last answer, once MaxOutage
// is spent.
func TestFollowGivesUpOnABusyDashboard(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc((&busyStatus{busy: -1}).serve))
	t.Cleanup(srv.Close)
	c := outageClient(t, srv.URL, 300*time.Millisecond)
	_, err := c.Follow(ctx(t), "job1", &strings.Builder{}, nil)
	var apiErr *raysubmit.APIError
	if !errors.Is(err, raysubmit.ErrUnreachable) || !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Follow = %v, want ErrUnreachable with the 503", err)
	}
	want := "follow logs of job job1: dashboard not answering for 300ms (" + srv.URL +
		"): get job job1: GET /api/jobs/job1: HTTP 503: busy"
	if err.Error() != want {
		t.Errorf("Follow error\n got %q\nwant %q", err, want)
	}
}

// TestFollowUnknownJob: Ray's 404 is an answer, not an outage: Follow
// ends at once with ErrNotFound.
func TestFollowUnknownJob(t *testing.T) {
	t.Parallel()
	srv, n := scripted(t, answer(404, "Job job1 does not exist"))
	c := outageClient(t, srv.URL, time.Hour)
	reported := false
	_, err := c.Follow(ctx(t), "job1", &strings.Builder{}, func(raysubmit.Outage) { reported = true })
	if !errors.Is(err, raysubmit.ErrNotFound) {
		t.Errorf("Follow = %v, want ErrNotFound", err)
	}
	if reported || n.Load() != 1 {
		t.Errorf("outage reported %v after %d requests, want none after 1", reported, n.Load())
	}
}
