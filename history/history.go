// Package history keeps what a step did after its cluster is gone: one
// record per ended step (who ran what, how it ended, how long each phase
// took, the GPU-hours) and the driver's log, bounded, beside it.
//
// A Dir holds them on this machine, one directory per step under the
// state dir: NAME/record.json and NAME/driver.log. A step writes its
// driver log while it runs (LogWriter), so `raystep logs NAME` can show a
// running step's log too, and its record once it ended; the record is
// written to a temporary file and renamed, so a reader sees a whole record
// or none, and a record cut short by a crash is reported, not trusted.
package history

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Record is one ended step: what `raystep ls --finished` lists and `raystep
// logs` heads its log with.
type Record struct {
	// Version is the record format's version, 1.
	Version int `json:"version"`
	// Name is the step's identity: its Ray submission id, also the name of
	// its cluster where the backend names one.
	Name string `json:"name"`
	// Kind is step for a step (the only kind recorded so far).
	Kind string `json:"kind"`
	// JobKind is the spec's kind: train, eval or batch_inference.
	JobKind string `json:"job_kind,omitempty"`
	// Spec is the spec's metadata.name, SpecDigest the SHA-256 of the
	// resolved spec (after profile, overrides and partition values).
	Spec       string `json:"spec"`
	SpecDigest string `json:"spec_digest,omitempty"`
	Owner      string `json:"owner,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	// DagsterRun, StepKey, Assets and Partition place a step run by Dagster.
	DagsterRun string   `json:"dagster_run,omitempty"`
	StepKey    string   `json:"step_key,omitempty"`
	Assets     []string `json:"assets,omitempty"`
	Partition  string   `json:"partition,omitempty"`
	// Backend is local or kuberay; Cluster names the cluster the step ran
	// on, Shape describes it.
	Backend string `json:"backend"`
	Cluster string `json:"cluster,omitempty"`
	Shape   string `json:"shape,omitempty"`
	// GPUType and GPUCount are the cluster's GPUs; GPUHours is GPUCount
	// times the job's run time.
	GPUType  string  `json:"gpu_type,omitempty"`
	GPUCount int     `json:"gpu_count,omitempty"`
	GPUHours float64 `json:"gpu_hours"`
	// Phases holds the seconds spent in each phase that ran.
	Phases map[string]float64 `json:"phases,omitempty"`
	// Status and Message are the last thing Ray said about the job; empty
	// when it was never submitted.
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	// ExitCode is raystep's exit code (-1 when unknown: Reaped), Reason
	// why the step ended (Reasons).
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason"`
	// Error is raystep's own error, if any.
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	// Utilization is each node's CPU, memory and GPU use while the job
	// ran: mean and peak of the samples the step took.
	Utilization []NodeUtilization `json:"utilization,omitempty"`
	// Log says how much of the driver's log was kept.
	Log LogSummary `json:"log"`
	// PID is the raystep process that ran the step, while it runs.
	PID int `json:"pid,omitempty"`
}

// NodeUtilization is one node's utilization over a step's job, in
// percent.
type NodeUtilization struct {
	Node    string `json:"node"`
	Samples int    `json:"samples"`
	CPU     Stat   `json:"cpu"`
	Memory  Stat   `json:"memory"`
	// GPU is left out for a node without GPUs.
	GPU *Stat `json:"gpu,omitempty"`
}

// Stat is a mean and a peak.
type Stat struct {
	Mean float64 `json:"mean"`
	Peak float64 `json:"peak"`
}

// Reasons a step ended with. A cancelled step's reason names the signal:
// "cancelled (SIGTERM)".
const (
	Succeeded      = "succeeded"
	Failed         = "failed"
	Deadline       = "deadline"
	Infrastructure = "infrastructure"
	Preempted      = "preempted"
	Invalid        = "invalid"
)

// LogSummary tells how much of a driver log was kept.
type LogSummary struct {
	// Bytes is what the driver wrote, Kept what the record holds.
	Bytes int64 `json:"bytes"`
	Kept  int64 `json:"kept"`
}

// Cut reports whether part of the log was left out.
func (l LogSummary) Cut() bool { return l.Kept < l.Bytes }

// Duration is how long the step took, start to end.
func (r Record) Duration() time.Duration { return r.Ended.Sub(r.Started) }

// nameRE is what a history name may be: a submission id or cluster name,
// a DNS label, so it can never be a path.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ErrName is wrapped by every error about a name that cannot be one of a
// step's.
var ErrName = errors.New("not a step name")

// CheckName refuses a name that is not a DNS label: one with a slash, a
// dot, upper-case letters or more than 63 characters.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q: want a DNS label (lower-case letters, digits and '-', at most 63)", ErrName, name)
	}
	return nil
}
