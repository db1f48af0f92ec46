package ui

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/raystep/raystep/raysubmit"
)

// The cluster page, /clusters/{namespace}/{name}/ (namespace _local for a
// head on this machine): the cluster's row, its pods with the reason of
// any problem and the warnings about them (from the watches), its Ray
// jobs with status and duration and its nodes' utilization (from the
// probe of its head). It is complete without JavaScript; detail.js keeps
// it live from /clusters/{namespace}/{name}/events.

var detailPage = parsed("assets/detail.html")

// detailState is what the cluster pages share: the probes of heads and
// the log tails, started on first use.
type detailState struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	probes *probes
	tails  *tails
}

func (s *Server) shared() *detailState {
	d := &s.detail
	d.once.Do(func() {
		d.ctx, d.cancel = context.WithCancel(context.Background())
		reach := s.Reach
		if reach == nil {
			reach = func(context.Context, *Record) (Head, error) { return Head{}, ErrNoDashboard }
		}
		d.probes = &probes{reach: reach, find: s.record, poll: s.Poll, pool: pool[*probe]{linger: probeLinger, ctx: d.ctx}}
		d.tails = &tails{reach: reach, pool: pool[*tail]{linger: tailLinger, ctx: d.ctx}}
	})
	return d
}

// Close stops the probes and log tails of the cluster pages.
func (s *Server) Close() {
	if d := s.shared(); d.cancel != nil {
		d.cancel()
	}
}

// detailRoutes adds the cluster pages' routes to mux.
func (s *Server) detailRoutes(mux *http.ServeMux) {
	const c = "/clusters/{ns}/{name}/"
	mux.HandleFunc("GET "+c+"{$}", s.clusterPage)
	mux.HandleFunc("GET "+c+"events", s.clusterEvents)
	mux.HandleFunc("GET "+c+"util/{metric}", s.utilChart)
	mux.HandleFunc("GET "+c+"jobs/{id}/{$}", s.logPage)
	mux.HandleFunc("GET "+c+"jobs/{id}/events", s.logEvents)
	mux.HandleFunc("GET "+c+"jobs/{id}/logs.txt", s.logDownload)
	mux.HandleFunc("GET "+c+"dashboard/{path...}", s.dashboardProxy)
}

// find returns the record the request's {ns} and {name} name; it answers
// 404 itself when there is none.
func (s *Server) find(w http.ResponseWriter, r *http.Request) *Record {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	var found *Record
	for _, rec := range s.Store.Records() {
		if rec.pathNamespace() == ns && rec.Name == name && (found == nil || rec.ClusterKind == "step") {
			found = rec
		}
	}
	if found == nil {
		http.Error(w, "no raystep cluster "+r.PathValue("ns")+"/"+name+" (it may have been torn down)", http.StatusNotFound)
	}
	return found
}

// record returns the record named key, nil when there is none.
func (s *Server) record(key string) *Record {
	for _, rec := range s.Store.Records() {
		if rec.Key() == key {
			return rec
		}
	}
	return nil
}

// JobRow is one Ray job on a cluster as its page shows it. It carries
// nothing of the job's runtime_env or metadata: they may hold secrets.
type JobRow struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Entrypoint string `json:"entrypoint"`
	Message    string `json:"message"`
	Started    string `json:"started"`
	Duration   string `json:"duration"`
	LogURL     string `json:"logUrl"`
}

func jobRows(jobs []raysubmit.JobDetails, now time.Time) []JobRow {
	rows := make([]JobRow, 0, len(jobs))
	for _, j := range jobs {
		id := j.SubmissionID
		if id == "" {
			continue // a driver started by other means: no Jobs API log
		}
		row := JobRow{ID: id, Status: string(j.Status), Entrypoint: j.Entrypoint, Message: j.Message,
			LogURL: "jobs/" + url.PathEscape(id) + "/"}
		if start := j.Started(); !start.IsZero() {
			end := j.Ended()
			if end.IsZero() {
				end = now
			}
			row.Started = start.UTC().Format(time.DateTime) + " UTC"
			row.Duration = duration.HumanDuration(end.Sub(start))
		}
		rows = append(rows, row)
	}
	return rows
}

// clusterData is what detail.html renders.
type clusterData struct {
	Cluster  Row
	Local    bool
	Pods     []PodRow
	Events   []EventRow
	Jobs     []JobRow
	RayError string
	Polled   bool
	Metrics  []chart
}

// chart is one utilization chart: its file name and its heading.
type chart struct{ ID, Title string }

// metrics are the utilization charts.
var metrics = []chart{{"cpu", "CPU per node"}, {"mem", "Memory per node"}, {"gpu", "GPU per node"}}

func (s *Server) clusterData(rec *Record, p *probe) clusterData {
	now := s.now()
	d := clusterData{Cluster: view(rec, now, s.Dagster), Local: rec.Namespace == "", Metrics: metrics}
	if s.Pods != nil && !d.Local {
		d.Pods, d.Events = s.Pods.Of(rec.Namespace, rayCluster(rec), rec.Name, now)
	}
	jobs, _, err, polled := p.state()
	d.Jobs, d.Polled = jobRows(jobs, now), polled
	if err != nil {
		d.RayError = err.Error()
	}
	return d
}

// rayCluster is the RayCluster of rec: a step's is KubeRay's, an
// interactive or run-scoped cluster is one.
func rayCluster(rec *Record) string {
	if rec.ClusterKind == "step" {
		return rec.RayCluster
	}
	return rec.Name
}

func (s *Server) clusterPage(w http.ResponseWriter, r *http.Request) {
	rec := s.find(w, r)
	if rec == nil {
		return
	}
	p, release := s.shared().probes.acquire(rec)
	defer release()
	p.await(r.Context(), 10*time.Second) // a page without JavaScript shows the first poll
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := detailPage().Execute(w, s.clusterData(rec, p)); err != nil {
		http.Error(w, "render the cluster page: "+err.Error(), http.StatusInternalServerError)
	}
}

// clusterEvents streams the cluster page's parts as server-sent events:
// "cluster" (its Row), "pods", "warnings", "jobs" and "util" (the charts
// changed), each time its record, its pods or a poll of its head changed;
// "gone" once its record is removed.
func (s *Server) clusterEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	rec := s.find(w, r)
	if rec == nil {
		return
	}
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	_, changes, cancel := s.Store.Subscribe()
	defer cancel()
	p, release := s.shared().probes.acquire(rec)
	defer release()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	var podsChanged <-chan struct{}
	for {
		if s.Pods != nil {
			podsChanged = s.Pods.Changed()
		}
		probed := p.Changed()
		d := s.clusterData(rec, p)
		send(w, "cluster", d.Cluster)
		send(w, "pods", d.Pods)
		send(w, "warnings", d.Events)
		send(w, "jobs", map[string]any{"jobs": d.Jobs, "error": d.RayError})
		send(w, "util", map[string]int64{"at": s.now().UnixMilli()})
		flusher.Flush()
		for changed := false; !changed; {
			select {
			case <-r.Context().Done():
				return
			case <-podsChanged:
				changed = true
			case <-probed:
				changed = true
			case c, ok := <-changes:
				if !ok {
					return // fell behind: the browser reconnects
				}
				if c.Key != rec.Key() {
					continue
				}
				if c.Record == nil {
					send(w, "gone", map[string]string{"key": c.Key})
					flusher.Flush()
					return
				}
				rec, changed = c.Record, true
			}
		}
	}
}
