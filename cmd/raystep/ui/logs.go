package ui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/raystep/raystep/raysubmit"
)

// A job's live log, /clusters/{ns}/{name}/jobs/{id}/: one upstream tail
// of the Ray job's log per job (raysubmit's Follow: the log websocket,
// reconnected, then the full log once), shared by every page that shows
// it and kept for tailLinger after the last one closed. It keeps the last
// logKeep lines, so memory stays flat however long the log; logs.txt
// streams the whole log from the head.

const (
	logKeep    = 5000
	tailLinger = 2 * time.Minute
)

var logPage = parsed("assets/log.html")

// tail is the shared tail of one job's log.
type tail struct {
	mu      sync.Mutex
	lines   []string // the last logKeep lines
	next    int64    // number of the line after the last one
	done    bool     // the follow ended
	err     error    // why, when it failed
	changed chan struct{}
}

// tails are the running tails by record key and job id.
type tails struct {
	pool  pool[*tail]
	reach Reach
}

func (ts *tails) acquire(rec *Record, id string) (*tail, func()) {
	return ts.pool.acquire(rec.Key()+"/"+id, func(ctx context.Context, forget func()) *tail {
		t := &tail{changed: make(chan struct{})}
		go ts.follow(ctx, t, rec, id, forget)
		return t
	})
}

// follow tails the job's log into t until it ends or ctx is done.
func (ts *tails) follow(ctx context.Context, t *tail, rec *Record, id string, forget func()) {
	err := func() error {
		h, err := ts.reach(ctx, rec)
		if err != nil {
			return err
		}
		c, err := h.Client()
		if err != nil {
			return err
		}
		return c.FollowLines(ctx, id, func(line []byte) error { t.add(string(line)); return nil }, nil)
	}()
	t.end(err)
	if err != nil {
		forget() // the next page tries again
	}
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > logKeep {
		t.lines = append(t.lines[:0:0], t.lines[len(t.lines)-logKeep:]...)
	}
	t.next++
	t.wake()
}

func (t *tail) end(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done, t.err = true, err
	t.wake()
}

// wake tells the pages; t.mu is held.
func (t *tail) wake() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// since returns the lines from number from on (or the oldest kept, when
// those are gone), the number after them, whether the follow ended and
// why, and a channel closed at the next change.
func (t *tail) since(from int64) (lines []string, next int64, done bool, err error, changed <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := t.next - int64(len(t.lines))
	from = max(from, first)
	return append([]string(nil), t.lines[from-first:]...), t.next, t.done, t.err, t.changed
}

// logData is what log.html renders.
type logData struct {
	Cluster Row
	Back    string
	ID      string
	Text    string
	Done    bool
	Error   string
	Kept    int
}

// job returns the record and job id a log request names, answering 404
// itself when there is no such cluster.
func (s *Server) job(w http.ResponseWriter, r *http.Request) (*Record, string) {
	rec := s.find(w, r)
	if rec == nil {
		return nil, ""
	}
	return rec, r.PathValue("id")
}

func (s *Server) logPage(w http.ResponseWriter, r *http.Request) {
	rec, id := s.job(w, r)
	if rec == nil {
		return
	}
	t, release := s.shared().tails.acquire(rec, id)
	defer release()
	lines, _, done, err, _ := t.since(0)
	d := logData{Cluster: view(rec, s.now(), s.Dagster), Back: "../../", ID: id, Text: strings.Join(lines, "\n"), Done: done, Kept: logKeep}
	if err != nil {
		d.Error = err.Error()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := logPage().Execute(w, d); err != nil {
		http.Error(w, "render the log page: "+err.Error(), http.StatusInternalServerError)
	}
}

// logEvents streams the job's log as server-sent events: "lines" with
// {"from": N, "lines": [...]} (N the number of the first; the first
// event carries what is kept so far), then "end" with {"error": "..."}
// once the job's log is complete (or following it failed).
func (s *Server) logEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	rec, id := s.job(w, r)
	if rec == nil {
		return
	}
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	t, release := s.shared().tails.acquire(rec, id)
	defer release()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	var at int64
	for {
		lines, next, done, err, changed := t.since(at)
		if len(lines) > 0 || at == 0 {
			send(w, "lines", map[string]any{"from": next - int64(len(lines)), "lines": lines})
		}
		at = next
		if done {
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			send(w, "end", map[string]string{"error": msg})
			flusher.Flush()
			return
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
	}
}

// logDownload streams the job's whole log from its head as a text file.
func (s *Server) logDownload(w http.ResponseWriter, r *http.Request) {
	rec, id := s.job(w, r)
	if rec == nil {
		return
	}
	h, err := s.shared().probes.reach(r.Context(), rec)
	if err != nil {
		http.Error(w, "reach the Ray dashboard: "+err.Error(), http.StatusBadGateway)
		return
	}
	c, err := h.Client()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out := &countingWriter{w: w}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+safeFileName(rec.Name+"-"+id)+`.log"`)
	err = c.CopyLogs(r.Context(), id, out)
	switch {
	case err == nil:
	case out.n == 0:
		w.Header().Del("Content-Disposition")
		code := http.StatusBadGateway
		if errors.Is(err, raysubmit.ErrNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
	default: // the answer has begun: say it in the file
		_, _ = w.Write([]byte("\n[raystep ui: the log is incomplete: " + err.Error() + "]\n"))
	}
}

// countingWriter counts what passed through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// safeFileName keeps letters, digits, '-', '_' and '.'.
func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
