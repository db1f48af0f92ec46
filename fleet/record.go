// Package fleet is what raystep says about the clusters it manages,
// whatever backend runs them: the record `raystep ls`, `raystep gc` and
// `raystep ui` show, how ls prints it, and Fleet, the one interface ls and
// gc ask every backend through. It imports no backend; the backends
// (runner/local, runner/kuberay) implement it.
package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// The backends, as Record.Backend names them.
const (
	BackendLocal   = "local"
	BackendKubeRay = "kuberay"
)

// The kinds of cluster, as Record.ClusterKind names them.
const (
	// KindStep is a step's own cluster (a RayJob, or a private head).
	KindStep = "step"
	// KindInteractive is a person's cluster (raystep up).
	KindInteractive = "interactive"
	// KindRun is the cluster the steps of one Dagster run share.
	KindRun = "run"
)

// Record is one cluster as `raystep ls` shows it: a step's, an
// interactive one or a run's, on any backend.
type Record struct {
	// Backend is BackendLocal or BackendKubeRay.
	Backend string `json:"backend"`
	// Namespace and Name are the RayJob's (or the RayCluster's); a local
	// cluster has no namespace.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ClusterKind is KindStep, KindInteractive or KindRun: the KIND column.
	ClusterKind string `json:"clusterKind"`
	// Owner is the spec's metadata.owner (the raystep.dev/owner label).
	Owner string `json:"owner"`
	// Kind is the spec's kind (train, eval or batch_inference) for a step,
	// the ClusterKind otherwise.
	Kind string `json:"kind"`
	// GPUs is the GPU demand at full size, e.g. "a100-80gb=2".
	GPUs string `json:"gpus"`
	// Deployment is the cluster's state: on KubeRay its jobDeploymentStatus
	// ("New" before the operator saw it, "Queued" while suspended in a
	// queue, "Deleting" once deletion started) or the RayCluster's state;
	// locally "ready", "expired" or "gone", or a step's state.
	Deployment string `json:"deploymentStatus"`
	// Queue is the Kueue LocalQueue the RayJob is queued in, if any.
	Queue string `json:"queue,omitempty"`
	// JobStatus is the Ray job's status as last seen.
	JobStatus string `json:"jobStatus"`
	// Created is when the cluster was made.
	Created time.Time `json:"created"`
	// Dashboard is the cluster's dashboard URL (inside the cluster on
	// KubeRay).
	Dashboard string `json:"dashboard"`
	// RunID and Step are the Dagster run and step the cluster is for.
	RunID string `json:"dagsterRunId"`
	Step  string `json:"dagsterStep"`
	// Asset is the step's Dagster asset keys (slash-joined parts, comma
	// between keys), if any.
	Asset string `json:"dagsterAsset,omitempty"`
	// RayCluster is the RayCluster KubeRay made for a RayJob, once made.
	RayCluster string `json:"rayCluster"`
	// Reason is the backend's reason for the state, e.g. KubeRay's
	// DeadlineExceeded; empty when it gives none.
	Reason string `json:"reason,omitempty"`
	// Expires is when an interactive or run cluster expires; nil for steps.
	Expires *time.Time `json:"expires,omitempty"`
	// Notebook says the cluster has a notebook (`up --notebook`), which
	// `raystep notebook NAME` reaches.
	Notebook bool `json:"notebook,omitempty"`
	// GPUsHeld is the GPUs the cluster holds now: GPUs, or "" once idle
	// release gave them back (Released).
	GPUsHeld string `json:"gpusHeld"`
	// Released says idle release gave back the cluster's GPU workers;
	// `raystep up NAME` brings them back.
	Released bool `json:"released,omitempty"`
	// IdleSince is since when the cluster was last found idle (by
	// `raystep gc` on KubeRay, by its keeper locally); nil when it was
	// found in use, or never judged.
	IdleSince *time.Time `json:"idleSince,omitempty"`
}

// TableOptions shapes `raystep ls` output.
type TableOptions struct {
	// AllNamespaces adds a NAMESPACE column.
	AllNamespaces bool
	// Wide adds the Dagster run id, step and RayCluster.
	Wide bool
	// Now is the time ages are counted to.
	Now time.Time
}

// WriteTable prints records as kubectl-style columns.
func WriteTable(w io.Writer, rows []Record, o TableOptions) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := []string{"NAME", "KIND", "OWNER", "TYPE", "GPUS", "DEPLOYMENT", "JOB", "AGE", "EXPIRES", "IDLE", "DASHBOARD"}
	if o.AllNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	if o.Wide {
		head = append(head, "DAGSTER-RUN", "STEP", "RAYCLUSTER")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		typ := r.Kind
		if typ == r.ClusterKind {
			typ = "" // an interactive cluster runs no step of a kind
		}
		gpus := dash(r.GPUs)
		if r.Released {
			gpus = "released"
		}
		cols := []string{r.Name, r.ClusterKind, dash(r.Owner), dash(typ), gpus, r.Deployment, dash(r.JobStatus),
			duration.HumanDuration(o.Now.Sub(r.Created)), expires(r.Expires, o.Now), idle(r.IdleSince, o.Now), dash(r.Dashboard)}
		if o.AllNamespaces {
			cols = append([]string{dash(r.Namespace)}, cols...) // none for a local cluster
		}
		if o.Wide {
			cols = append(cols, dash(r.RunID), dash(r.Step), dash(r.RayCluster))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// WriteJSON prints records as a JSON array.
func WriteJSON(w io.Writer, rows []Record) error {
	if rows == nil {
		rows = []Record{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// expires shows an expiry as "in 3h" or "5m ago"; "-" for none.
func expires(t *time.Time, now time.Time) string {
	switch {
	case t == nil:
		return "-"
	case t.After(now):
		return "in " + duration.HumanDuration(t.Sub(now))
	}
	return duration.HumanDuration(now.Sub(*t)) + " ago"
}

// idle shows since when a cluster is idle as "12m"; "-" when it is not
// known to be.
func idle(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return duration.HumanDuration(now.Sub(*t))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
