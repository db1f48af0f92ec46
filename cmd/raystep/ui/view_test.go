package ui

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/fleet"
)

// TestStatusWords: a person reads one word for KubeRay's deployment
// status, the Ray job's status and the pods' problems together, and the
// GPU totals count only the clusters whose pods hold GPUs.
func TestStatusWords(t *testing.T) {
	rec := func(deployment, job, problem string) *Record {
		return &Record{Record: fleet.Record{Deployment: deployment, JobStatus: job, GPUs: "a100-80gb=2"}, Problem: problem}
	}
	tests := []struct {
		name   string
		r      *Record
		want   string
		active bool
	}{
		{"new", rec("New", "", ""), StatusStarting, true},
		{"suspended in a Kueue queue", rec("Suspended", "", ""), StatusQueued, false},
		{"head image does not pull", rec("Initializing", "", "ImagePullBackOff: container ray-head: Back-off pulling"), StatusFailing, true},
		{"no node takes the worker", rec("Initializing", "", "Unschedulable: 0/2 nodes are available"), StatusPending, false},
		{"one pod unschedulable, one crashing", rec("Initializing", "", "CrashLoopBackOff: container ray-head; Unschedulable: 0/2 nodes"), StatusFailing, true},
		{"job running", rec("Running", "RUNNING", ""), StatusRunning, true},
		{"running job outranks a worker's problem", rec("Running", "RUNNING", "CrashLoopBackOff: x"), StatusRunning, true},
		{"interactive cluster ready", rec("ready", "", ""), StatusReady, true},
		{"succeeded, tearing down", rec("Deleting", "SUCCEEDED", ""), StatusSucceeded, false},
		{"deleted while running", rec("Deleting", "RUNNING", ""), StatusDeleting, true},
		{"failed", rec("Failed", "FAILED", ""), StatusFailed, false},
	}
	for _, tt := range tests {
		got := Status(tt.r)
		if got != tt.want || active(got) != tt.active {
			t.Errorf("%s: Status = %s (active %v), want %s (active %v)", tt.name, got, active(got), tt.want, tt.active)
		}
	}
	var all []*Record
	for _, tt := range tests {
		all = append(all, tt.r)
	}
	want := []Total{{Type: "a100-80gb", Count: 2 * 7}}
	if diff := cmp.Diff(want, totals(all)); diff != "" {
		t.Errorf("GPU totals (-want +got):\n%s", diff)
	}
}
