package ui

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/raystep/raystep/history"
)

// The History view: /history lists the steps that ended (this machine's
// history and the profile's store, see history.Index), filtered by owner,
// kind, status and Dagster run; /history/NAME/ is one step's page with its
// record, phases, utilization and driver log; /api/history and
// /api/history/NAME serve the same records as JSON. All behind the
// server's Auth, Host and Origin checks, like every other route.

var (
	historyPage     = parsed("assets/history.html")
	historyStepPage = parsed("assets/history_step.html")
)

// historyRows is how many steps the list page shows; /api/history has
// them all.
const historyRows = 500

// historyLogShown is how much of a driver log the step page shows (its
// end); the download has the whole of what was kept.
const historyLogShown = 256 << 10

func (s *Server) historyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /history", s.historyList)
	mux.HandleFunc("GET /history/{name}/{$}", s.historyStep)
	mux.HandleFunc("GET /history/{name}/driver.log", s.historyLog)
	mux.HandleFunc("GET /api/history", s.historyAPI)
	mux.HandleFunc("GET /api/history/{name}", s.historyRecordAPI)
}

// HistoryFilter selects ended steps by owner, kind (step, or the spec's
// kind: train, eval, batch_inference), status (how it ended, e.g.
// succeeded, failed, cancelled, or Ray's job status) and Dagster run; an
// empty field matches everything.
type HistoryFilter struct {
	Owner, Kind, Status, Run string
	// Since keeps the steps that ended within that long; zero keeps all.
	Since time.Duration
}

func historyFilterFrom(q url.Values) (HistoryFilter, error) {
	f := HistoryFilter{Owner: q.Get("owner"), Kind: q.Get("kind"), Status: q.Get("status"), Run: q.Get("run")}
	if s := q.Get("since"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return f, fmt.Errorf("since=%q: want a positive duration such as 24h", s)
		}
		f.Since = d
	}
	return f, nil
}

// Match says whether r passes f.
func (f HistoryFilter) Match(r *history.Record) bool {
	return (f.Owner == "" || r.Owner == f.Owner) &&
		(f.Kind == "" || strings.EqualFold(r.Kind, f.Kind) || strings.EqualFold(r.JobKind, f.Kind)) &&
		(f.Status == "" || strings.HasPrefix(strings.ToLower(r.Reason), strings.ToLower(f.Status)) || strings.EqualFold(r.Status, f.Status)) &&
		(f.Run == "" || r.DagsterRun == f.Run)
}

// Any says whether f selects anything less than everything.
func (f HistoryFilter) Any() bool { return f != HistoryFilter{} }

// records lists the history f selects, the latest first, and what could
// not be read.
func (s *Server) records(r *http.Request, f HistoryFilter) ([]history.Entry, []error) {
	if s.History == nil {
		return nil, nil
	}
	var since time.Time
	if f.Since > 0 {
		since = s.now().Add(-f.Since)
	}
	all, errs := s.History.Entries(r.Context(), since)
	out := all[:0]
	for _, e := range all {
		if f.Match(&e.Record) {
			out = append(out, e)
		}
	}
	return out, errs
}

// HistoryRow is an ended step as one line of the History view.
type HistoryRow struct {
	Name, Detail, Spec, Kind, Owner, Run, RunURL, Asset, AssetURL, Backend string
	GPUs, GPUHours, Ended, EndedAt, Took, Exit, How, Class                 string
}

func (s *Server) historyRow(r *history.Record, now time.Time) HistoryRow {
	row := HistoryRow{
		Name: r.Name, Detail: "/history/" + url.PathEscape(r.Name) + "/", Spec: r.Spec, Kind: r.Kind, Owner: r.Owner,
		Run: r.DagsterRun, Backend: r.Backend, GPUHours: strconv.FormatFloat(r.GPUHours, 'f', 2, 64),
		Ended: duration.HumanDuration(now.Sub(r.Ended)) + " ago", EndedAt: r.Ended.UTC().Format(time.RFC3339),
		Took: r.Duration().Round(time.Second).String(), Exit: strconv.Itoa(r.ExitCode), How: r.Reason,
		Class: "status-" + reasonClass(r.Reason),
	}
	if r.JobKind != "" {
		row.Kind += " (" + r.JobKind + ")"
	}
	if r.ExitCode < 0 {
		row.Exit = "-"
	}
	if r.Status != "" && r.Reason != history.Succeeded {
		row.How += ", job " + r.Status
	}
	if len(r.Assets) > 0 {
		row.Asset = strings.Join(r.Assets, ", ")
	}
	if r.GPUCount > 0 {
		row.GPUs = fmt.Sprintf("%d × %s", r.GPUCount, r.GPUType)
	}
	if s.Dagster != nil {
		if r.DagsterRun != "" {
			row.RunURL = s.Dagster.JoinPath("runs", r.DagsterRun).String()
		}
		if len(r.Assets) > 0 {
			row.AssetURL = s.Dagster.JoinPath(append([]string{"assets"}, strings.Split(r.Assets[0], "/")...)...).String()
		}
	}
	return row
}

// reasonClass maps how a step ended to the page's status colours.
func reasonClass(reason string) string {
	switch {
	case reason == history.Succeeded:
		return "Succeeded"
	case strings.HasPrefix(reason, "cancelled"):
		return "Stopped"
	case strings.HasPrefix(reason, "deleted"): // a person's or a run's cluster, its life over
		return "Deleted"
	}
	return "Failed"
}

// historyListData is what history.html renders.
type historyListData struct {
	Filter  HistoryFilter
	Since   string
	Rows    []HistoryRow
	Count   int
	More    int
	Errors  []string
	Enabled bool
}

func (s *Server) historyList(w http.ResponseWriter, r *http.Request) {
	f, err := historyFilterFrom(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	recs, errs := s.records(r, f)
	now := s.now()
	d := historyListData{Filter: f, Since: r.URL.Query().Get("since"), Count: len(recs), Enabled: s.History != nil}
	for i := range recs[:min(len(recs), historyRows)] {
		d.Rows = append(d.Rows, s.historyRow(&recs[i].Record, now))
	}
	d.More = len(recs) - len(d.Rows)
	for _, e := range errs[:min(len(errs), 20)] {
		d.Errors = append(d.Errors, e.Error())
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := historyPage().Execute(w, d); err != nil {
		http.Error(w, "render the page: "+err.Error(), http.StatusInternalServerError)
	}
}

// historyAPI answers the records f selects as JSON, as `raystep ls
// --finished -o json` prints them.
func (s *Server) historyAPI(w http.ResponseWriter, r *http.Request) {
	f, err := historyFilterFrom(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	recs, _ := s.records(r, f)
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteByte('[')
	for i, e := range recs {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(e.JSON)
	}
	bw.WriteString("]\n")
	_ = bw.Flush()
}

// step reads the record the path names, answering 404 when there is none.
func (s *Server) step(w http.ResponseWriter, r *http.Request) (history.Record, bool) {
	name := r.PathValue("name")
	if s.History == nil || history.CheckName(name) != nil {
		http.NotFound(w, r)
		return history.Record{}, false
	}
	rec, err := s.History.Get(r.Context(), name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, "no ended step "+name+" in the history", http.StatusNotFound)
		return rec, false
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
		return rec, false
	}
	return rec, true
}

func (s *Server) historyRecordAPI(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.step(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rec)
}

// historyLog answers the step's driver log as kept, as plain text.
func (s *Server) historyLog(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.step(w, r)
	if !ok {
		return
	}
	rc, err := s.History.OpenLog(r.Context(), rec.Name)
	if err != nil {
		http.Error(w, "the driver log: "+err.Error(), http.StatusNotFound)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+rec.Name+`.log"`)
	_, _ = io.Copy(w, rc)
}

// historyStepData is what history_step.html renders.
type historyStepData struct {
	Row         HistoryRow
	Rec         history.Record
	Phases      []phaseRow
	Utilization []utilRow
	Log         string
	LogCut      bool
	LogError    string
	Started     string
}

type phaseRow struct{ Name, Took string }

type utilRow struct {
	Node, CPU, Memory, GPU string
	Samples                int
}

func stat(s history.Stat) string { return fmt.Sprintf("%.0f%% (peak %.0f%%)", s.Mean, s.Peak) }

// phaseOrder is the order phases run in.
var phaseOrder = map[string]int{"provision": 0, "dashboard": 1, "upload": 2, "submit": 3, "run": 4, "teardown": 5}

func (s *Server) historyStep(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.step(w, r)
	if !ok {
		return
	}
	d := historyStepData{Row: s.historyRow(&rec, s.now()), Rec: rec, Started: rec.Started.UTC().Format(time.RFC3339)}
	for name, secs := range rec.Phases {
		d.Phases = append(d.Phases, phaseRow{Name: name, Took: (time.Duration(secs * float64(time.Second))).Round(10 * time.Millisecond).String()})
	}
	sort.Slice(d.Phases, func(i, j int) bool { return phaseOrder[d.Phases[i].Name] < phaseOrder[d.Phases[j].Name] })
	for _, u := range rec.Utilization {
		row := utilRow{Node: u.Node, Samples: u.Samples, CPU: stat(u.CPU), Memory: stat(u.Memory), GPU: "none"}
		if u.GPU != nil {
			row.GPU = stat(*u.GPU)
		}
		d.Utilization = append(d.Utilization, row)
	}
	if rc, err := s.History.OpenLog(r.Context(), rec.Name); err != nil {
		d.LogError = err.Error()
	} else {
		data, err := io.ReadAll(io.LimitReader(rc, history.DefaultLogCap+4096))
		rc.Close()
		if err != nil {
			d.LogError = err.Error()
		}
		if len(data) > historyLogShown {
			data, d.LogCut = data[len(data)-historyLogShown:], true
		}
		d.Log = string(data)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := historyStepPage().Execute(w, d); err != nil {
		http.Error(w, "render the page: "+err.Error(), http.StatusInternalServerError)
	}
}
