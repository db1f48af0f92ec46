package schemas

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// queueProfile is the built-in profile with Kueue queues: one for all
// steps and one for a100-80gb.
func queueProfile(t *testing.T) *Profile {
	t.Helper()
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Queue = "shared"
	a100 := p.Spec.GPUTypes["a100-80gb"]
	a100.Queue = "a100"
	p.Spec.GPUTypes["a100-80gb"] = a100
	return p
}

const queueSpec = `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: queued, owner: me}
spec:
  kind: train
  entrypoint: python x.py
  cluster:
    rayVersion: "2.60.0"
    image: rayproject/ray:2.60.0
    workers:
`

// TestQueueChecks: what Kueue's admission webhook would refuse of a
// queued RayJob, and timeouts.queue, are refused with a pointer; a GPU
// type's queue wins, and a spec without queued GPU types takes the queue
// for all.
func TestQueueChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, workers, timeouts string
		want                    string // the error, or "queue=<name>"
	}{
		{name: "GPU type's queue", workers: "      - {name: gpu, gpuType: a100-80gb, cpus: 1, memory: 1Gi}\n", want: "queue=a100"},
		{name: "queue for all", workers: "      - {name: gpu, gpuType: l4, cpus: 1, memory: 1Gi}\n", want: "queue=shared"},
		{name: "two queues", workers: "      - {name: a, gpuType: a100-80gb, cpus: 1, memory: 1Gi}\n      - {name: b, cpus: 1, memory: 1Gi}\n      - {name: c, gpuType: h100-80gb, cpus: 1, memory: 1Gi}\n",
			want: `spec.yaml: /spec/cluster/workers/2/gpuType: gpuType "h100-80gb" is queued in Kueue LocalQueue "shared" but gpuType "a100-80gb" of an earlier worker in "a100": one step has one queue; use GPU types of one queue`},
		{name: "GPU types of one queue", workers: "      - {name: a, gpuType: l4, cpus: 1, memory: 1Gi}\n      - {name: c, gpuType: h100-80gb, cpus: 1, memory: 1Gi}\n", want: "queue=shared"},
		{name: "autoscaling", workers: "      - {name: gpu, gpuType: a100-80gb, cpus: 1, memory: 1Gi, minReplicas: 1, maxReplicas: 4}\n",
			want: `spec.yaml: /spec/cluster/workers/0: autoscaling (minReplicas != maxReplicas): Kueue LocalQueue "a100" (profile builtin) admits fixed-size clusters only; set replicas alone`},
		{name: "a worker group named head", workers: "      - {name: head, cpus: 1, memory: 1Gi}\n",
			want: `spec.yaml: /spec/cluster/workers/0/name: "head" is the head's name in Kueue: Kueue LocalQueue "shared" (profile builtin) admits no worker group of that name`},
		{name: "queue timeout", workers: "      - {name: w, cpus: 1, memory: 1Gi}\n", timeouts: "  timeouts: {queue: 2h}\n", want: "queue=shared"},
		{name: "queue timeout too long", workers: "      - {name: w, cpus: 1, memory: 1Gi}\n", timeouts: "  timeouts: {queue: 200h}\n",
			want: "spec.yaml: /spec/timeouts/queue: 200h exceeds the longest queue wait raystep allows, 168h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := queueProfile(t)
			spec, err := Parse("spec.yaml", []byte(queueSpec+tt.workers+tt.timeouts), LoadOptions{Profile: p})
			got := ""
			if err != nil {
				var ve *ValidationErrors
				if !errors.As(err, &ve) {
					t.Fatalf("Parse = %v, want *ValidationErrors", err)
				}
				got = err.Error()
			} else {
				got = "queue=" + p.QueueFor(spec.Spec.Cluster.Workers)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.timeouts == "  timeouts: {queue: 2h}\n" && err == nil && spec.Spec.Timeouts.Queue != 2*time.Hour {
				t.Errorf("timeouts.queue = %s, want 2h", spec.Spec.Timeouts.Queue)
			}
		})
	}
}

// TestProfileQueueField: the profile's queues pass its schema; a name
// that is no Kubernetes name does not.
func TestProfileQueueField(t *testing.T) {
	t.Parallel()
	base := string(DefaultProfileYAML())
	if _, err := ParseProfile("p.yaml", []byte(base+"  queue: shared\n")); err != nil {
		t.Fatalf("profile with spec.queue: %v", err)
	}
	_, err := ParseProfile("p.yaml", []byte(base+"  queue: Not_A_Name\n"))
	var ve *ValidationErrors
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Pointer != "/spec/queue" {
		t.Fatalf("bad queue name: %v, want one error at /spec/queue", err)
	}
}
