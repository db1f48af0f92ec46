package runner_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

func TestRunClusterName(t *testing.T) {
	t.Parallel()
	a := schemas.Cluster{Image: "rayproject/ray:2.60.0", Head: schemas.Head{CPUs: resource.MustParse("2")}}
	b := a
	b.Reuse = schemas.ReuseRun
	c := a
	c.Head.CPUs = resource.MustParse("1")
	if runner.ClusterHash(a) != runner.ClusterHash(b) {
		t.Errorf("the reuse setting changed the cluster hash")
	}
	if runner.ClusterHash(a) == runner.ClusterHash(c) {
		t.Errorf("another head size kept the cluster hash")
	}
	// A section without secretEnv hashes as before secretEnv existed, so a
	// step of a newer raystep still finds the run-scoped cluster an older
	// one made for the same run.
	if got := runner.ClusterHash(a); got != "6d6a74b4a023eb78" {
		t.Errorf("ClusterHash = %s, want 6d6a74b4a023eb78 as before", got)
	}
	d := a
	d.SecretEnv = []schemas.SecretEnv{{Name: "WANDB_API_KEY", Secret: "wandb", Key: "api-key"}}
	if runner.ClusterHash(a) == runner.ClusterHash(d) {
		t.Errorf("a secretEnv entry kept the cluster hash")
	}
	for _, tt := range []struct{ name, runID, want string }{
		{"uuid", "A1A655B3-e009-4fb8-99bc-763a2b5e20ab", "run-a1a655b3-"},
		{"short", "x_1", "run-x1-"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := runner.RunClusterName(tt.runID, runner.ClusterHash(a))
			if len(got) != len(tt.want)+8 || got[:len(tt.want)] != tt.want {
				t.Errorf("RunClusterName(%q) = %q, want %s + 8 hex digits", tt.runID, got, tt.want)
			}
			if msgs := validation.IsDNS1035Label(got); len(msgs) > 0 {
				t.Errorf("%q is not a DNS-1035 label: %v", got, msgs)
			}
		})
	}
}
