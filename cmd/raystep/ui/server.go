package ui

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/history"
)

//go:embed assets
var assets embed.FS

// The pages' templates are parsed the first time one is served, not at
// start-up: every raystep command links this package, and a step's
// process would otherwise parse them all (about a millisecond) for
// nothing. TestTemplatesParse parses each.
var page = parsed("assets/page.html")

// parsed returns the template of the embedded file name, parsed once, on
// first use.
func parsed(name string) func() *template.Template {
	return sync.OnceValue(func() *template.Template {
		return template.Must(template.ParseFS(assets, name))
	})
}

// Server answers the page (/), its assets (/static/), the JSON API
// (/api/clusters) and live updates (/events) from a Store.
type Server struct {
	// Store holds the records; Watch fills it.
	Store *Store
	// Auth decides who may read.
	Auth Auth
	// Dagster is the Dagster UI's base URL runs and assets link into; nil
	// shows them unlinked.
	Dagster *url.URL
	// Scope names what the watches cover, e.g. "namespace ml-ads".
	Scope string
	// Now is the clock ages are counted to; nil means time.Now.
	Now func() time.Time
	// Reach finds a cluster's Ray dashboard for its page, its logs and the
	// dashboard proxy (see detail.go); nil shows none.
	Reach Reach
	// Pods holds the Ray pods and warnings of the cluster pages; nil shows none.
	Pods *Pods
	// History is the history of ended steps the History view shows; nil
	// shows none.
	History *history.Index
	// Poll is how often an open cluster page's head is asked for its jobs
	// and utilization; zero means every 5s.
	Poll time.Duration

	detail detailState
}

// Handler returns the server's routes behind Auth.
func (s *Server) Handler() http.Handler {
	static, _ := fs.Sub(assets, "assets")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.list)
	mux.HandleFunc("GET /api/clusters", s.api)
	mux.HandleFunc("GET /events", s.events)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.detailRoutes(mux)
	s.historyRoutes(mux)
	return s.Auth.wrap(mux)
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// pageData is what page.html renders.
type pageData struct {
	Scope  string
	Filter Filter
	Rows   []Row
	Totals []Total
	Count  int
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.render(w, filterFrom(r.URL.Query())); err != nil {
		http.Error(w, "render the page: "+err.Error(), http.StatusInternalServerError)
	}
}

// render writes the page of the records f selects.
func (s *Server) render(w io.Writer, f Filter) error {
	records := s.matching(s.Store.Records(), f)
	now := s.now()
	d := pageData{Scope: s.Scope, Filter: f, Totals: totals(records), Count: len(records), Rows: make([]Row, len(records))}
	for i, rec := range records {
		d.Rows[i] = view(rec, now, s.Dagster)
	}
	return page().Execute(w, d)
}

func (s *Server) matching(all []*Record, f Filter) []*Record {
	out := all[:0:0]
	for _, r := range all {
		if f.Match(r) {
			out = append(out, r)
		}
	}
	return out
}

// api answers the records as `raystep ls -o json` prints them.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	records := s.matching(s.Store.Records(), filterFrom(r.URL.Query()))
	rows := make([]fleet.Record, len(records))
	for i, rec := range records {
		rows[i] = rec.Record
	}
	w.Header().Set("Content-Type", "application/json")
	_ = fleet.WriteJSON(w, rows)
}

// events streams, as server-sent events, a "snapshot" of the rows the
// query selects, then an "upsert" or "remove" per change and the new GPU
// "totals". A client that falls behind is disconnected and, like any
// EventSource, reconnects to a fresh snapshot.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	f := filterFrom(r.URL.Query())
	snapshot, changes, cancel := s.Store.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	now := s.now()
	rows := []Row{}
	for _, rec := range s.matching(snapshot, f) {
		rows = append(rows, view(rec, now, s.Dagster))
	}
	send(w, "snapshot", rows)
	send(w, "totals", totals(s.matching(snapshot, f)))
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case c, ok := <-changes:
			if !ok {
				return
			}
			if c.Record != nil && f.Match(c.Record) {
				send(w, "upsert", view(c.Record, s.now(), s.Dagster))
			} else {
				send(w, "remove", map[string]string{"key": c.Key})
			}
			send(w, "totals", totals(s.matching(s.Store.Records(), f)))
			flusher.Flush()
		}
	}
}

// send writes one server-sent event whose data is v as JSON (one line).
func send(w io.Writer, event string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}
