package ui

import (
	"net/url"
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
	Dashboard string `json:"dashboard"`
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
)

// Status combines a record's deployment and Ray job status into one word.
func Status(r *Record) string {
	d, j := r.Deployment, r.JobStatus
	switch {
	case d == "Deleting":
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
	}
	return StatusStarting
}

// active says whether a cluster in status holds its GPUs.
func active(status string) bool {
	switch status {
	case StatusQueued, StatusSucceeded, StatusFailed, StatusStopped:
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
		RunID: r.RunID, Asset: r.Asset, GPUs: strings.ReplaceAll(r.GPUs, "=", " × "), Status: Status(r), Reason: r.Reason,
		Age: duration.HumanDuration(now.Sub(r.Created)), Dashboard: r.Dashboard,
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
	return (f.Namespace == "" || r.Namespace == f.Namespace) &&
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
