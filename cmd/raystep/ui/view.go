package ui

import (
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Row is a record as one line of the page: what the HTML table and the
// live updates show, already worded for a person.
type Row struct {
	Key       string `json:"key"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Type      string `json:"type"`
	Owner     string `json:"owner"`
	RunID     string `json:"run"`
	RunURL    string `json:"runUrl"`
	Asset     string `json:"asset"`
	AssetURL  string `json:"assetUrl"`
	GPUs      string `json:"gpus"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	Age       string `json:"age"`
	Expires   string `json:"expires"`
	// Idle is how long nobody has used an interactive cluster, as gc (or
	// a local head's supervisor) last found; empty while in use.
	Idle     string `json:"idle"`
	GPUHours string `json:"gpuHours"`
	// Detail is the cluster's page and Dashboard its Ray dashboard through
	// raystep's proxy, both paths on this server.
	Detail    string `json:"detail"`
	Dashboard string `json:"dashboard"`
	// Notebook is the command that opens the cluster's notebook, for a
	// cluster that has one: it runs with the person's own credentials,
	// and the page never holds the notebook's token.
	Notebook string `json:"notebook,omitempty"`
	// Clock lets the page move Age, Expires and GPU-hours on between
	// updates, which come only when the cluster changes.
	Clock Clock `json:"clock"`
}

// Clock is what a row's times are counted from: the server's time when
// the row was made (At), the cluster's creation and expiry, and its GPU
// time at At with the GPUs its pods hold now, all in Unix milliseconds.
type Clock struct {
	At        int64 `json:"at"`
	Created   int64 `json:"created"`
	Expires   int64 `json:"expires,omitempty"`
	IdleSince int64 `json:"idleSince,omitempty"`
	GPUMillis int64 `json:"gpuMillis"`
	GPUsHeld  int   `json:"gpusHeld"`
}

// ClusterPath is the path of a cluster's page on the server:
// /clusters/NAMESPACE/NAME/, with LocalNamespace for a local head. Its
// Ray dashboard is under dashboard/ there.
func ClusterPath(r *Record) string {
	return "/" + path.Join("clusters", url.PathEscape(r.pathNamespace()), url.PathEscape(r.Name)) + "/"
}

// NotebookCommand is the raystep command that opens r's notebook.
func NotebookCommand(r *Record) string {
	if r.local() {
		return "raystep notebook " + r.Name
	}
	return "raystep notebook -n " + r.Namespace + " " + r.Name
}

// Status words a person reads on the page.
const (
	StatusQueued    = "Queued"
	StatusStarting  = "Starting"
	StatusReady     = "Ready"
	StatusRunning   = "Running"
	StatusRetrying  = "Retrying"
	StatusSucceeded = "Succeeded"
	StatusFailed    = "Failed"
	StatusStopped   = "Stopped"
	StatusDeleting  = "Deleting"
	// StatusPending is a starting cluster a pod of which no node takes
	// (Unschedulable); StatusFailing one a pod of which cannot run
	// (ImagePullBackOff, CrashLoopBackOff, ...): a step fails on it soon.
	StatusPending = "Pending"
	StatusFailing = "Failing"
)

// Status combines a record's deployment and Ray job status into one word.
func Status(r *Record) string {
	d, j := r.Deployment, r.JobStatus
	switch {
	case d == "Deleting" && j != "SUCCEEDED" && j != "FAILED" && j != "STOPPED":
		return StatusDeleting
	case strings.HasPrefix(d, "Queued"), d == "Suspended", d == "Suspending":
		return StatusQueued
	case j == "SUCCEEDED":
		return StatusSucceeded
	case j == "FAILED", d == "Failed", d == "ValidationFailed":
		return StatusFailed
	case j == "STOPPED":
		return StatusStopped
	case j == "RUNNING", d == "Running":
		return StatusRunning
	case d == "Retrying":
		return StatusRetrying
	case d == "Waiting", d == "ready":
		return StatusReady
	case r.Problem != "" && onlyUnschedulable(r.Problem):
		return StatusPending
	case r.Problem != "":
		return StatusFailing
	}
	return StatusStarting
}

// onlyUnschedulable says whether every one of problems ("; "-joined, as
// Record.Problem) is a pod no node takes.
func onlyUnschedulable(problems string) bool {
	for p := range strings.SplitSeq(problems, "; ") {
		if !strings.HasPrefix(p, "Unschedulable") {
			return false
		}
	}
	return true
}

// active says whether a cluster in status holds its GPUs.
func active(status string) bool {
	switch status {
	case StatusQueued, StatusPending, StatusSucceeded, StatusFailed, StatusStopped:
		return false
	}
	return true
}

// view words r for the page at now; dagster is the Dagster UI's base URL,
// or nil.
func view(r *Record, now time.Time, dagster *url.URL) Row {
	typ := r.Kind
	if typ == r.ClusterKind {
		typ = ""
	}
	row := Row{
		Key: r.Key(), Namespace: r.Namespace, Name: r.Name, Kind: r.ClusterKind, Type: typ, Owner: r.Owner,
		RunID: r.RunID, Asset: r.Asset, GPUs: strings.ReplaceAll(r.GPUs, "=", " × "), Status: Status(r), Reason: reason(r),
		Age: duration.HumanDuration(now.Sub(r.Created)), GPUHours: gpuHours(r, now), Detail: ClusterPath(r),
	}
	row.Clock = Clock{At: now.UnixMilli(), Created: r.Created.UnixMilli(), GPUMillis: r.GPUTime(now).Milliseconds()}
	for _, s := range r.GPUSpans {
		row.Clock.GPUsHeld += s.GPUs
	}
	if r.Expires != nil {
		row.Clock.Expires = r.Expires.UnixMilli()
	}
	if r.IdleSince != nil {
		row.Clock.IdleSince = r.IdleSince.UnixMilli()
		row.Idle = duration.HumanDuration(now.Sub(*r.IdleSince))
	}
	if r.Released {
		row.GPUs += " (released while idle)"
	}
	if r.local() {
		row.Namespace = "(this machine)"
	}
	if r.Dashboard != "" {
		row.Dashboard = row.Detail + "dashboard/"
	}
	if r.Notebook {
		row.Notebook = NotebookCommand(r)
	}
	if r.Expires != nil {
		if r.Expires.After(now) {
			row.Expires = "in " + duration.HumanDuration(r.Expires.Sub(now))
		} else {
			row.Expires = duration.HumanDuration(now.Sub(*r.Expires)) + " ago"
		}
	}
	if dagster != nil {
		if r.RunID != "" {
			row.RunURL = dagster.JoinPath("runs", r.RunID).String()
		}
		if first, _, _ := strings.Cut(r.Asset, ","); first != "" {
			row.AssetURL = dagster.JoinPath(append([]string{"assets"}, strings.Split(first, "/")...)...).String()
		}
	}
	return row
}

// reason is why r is where it is, for a person: its pods' problem, then
// KubeRay's reason, then the Kueue queue a queued RayJob waits in.
func reason(r *Record) string {
	switch {
	case r.Problem != "":
		return r.Problem
	case r.Reason != "":
		return r.Reason
	case r.Deployment == "Deleting" && Status(r) != StatusDeleting:
		return "tearing down"
	case r.Queue != "" && Status(r) == StatusQueued:
		return "waiting for Kueue to admit it (LocalQueue " + r.Queue + ")"
	}
	return ""
}

// gpuHours is the GPU time r's pods have held, in hours with two decimals,
// or "" when no pod of it has held a GPU (or none is watched: local heads).
func gpuHours(r *Record, now time.Time) string {
	t := r.GPUTime(now)
	if t <= 0 {
		return ""
	}
	return strconv.FormatFloat(t.Hours(), 'f', 2, 64)
}

// Filter selects records by namespace, owner, kind (step, interactive, or
// the spec's kind) and status word; an empty field matches everything.
type Filter struct {
	Namespace, Owner, Kind, Status string
}

// filterFrom reads a Filter from a page's query.
func filterFrom(q url.Values) Filter {
	return Filter{Namespace: q.Get("namespace"), Owner: q.Get("owner"), Kind: q.Get("kind"), Status: q.Get("status")}
}

// Match says whether r passes f.
func (f Filter) Match(r *Record) bool {
	return (f.Namespace == "" || r.pathNamespace() == f.Namespace) &&
		(f.Owner == "" || r.Owner == f.Owner) &&
		(f.Kind == "" || strings.EqualFold(r.ClusterKind, f.Kind) || strings.EqualFold(r.Kind, f.Kind)) &&
		(f.Status == "" || strings.EqualFold(Status(r), f.Status))
}

// Total is the GPUs of one type held by active clusters.
type Total struct {
	Type  string `json:"type"`
	Count int    `json:"count"`
}

// totals adds up, per GPU type, the GPUs of records that hold them, in
// order of first appearance.
func totals(records []*Record) []Total {
	var out []Total
	index := map[string]int{}
	for _, r := range records {
		if !active(Status(r)) || r.GPUs == "" {
			continue
		}
		for part := range strings.SplitSeq(r.GPUs, ",") {
			typ, count, ok := strings.Cut(part, "=")
			n, err := strconv.Atoi(count)
			if !ok || err != nil {
				continue
			}
			i, seen := index[typ]
			if !seen {
				i = len(out)
				index[typ] = i
				out = append(out, Total{Type: typ})
			}
			out[i].Count += n
		}
	}
	return out
}
