package kuberay

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
)

// TestJudgeCluster: gc deletes an interactive or run-scoped cluster once
// its expiry has passed, never before, never without a valid expiry,
// never one already being deleted or younger than --older-than; its
// reason names the cluster's kind.
func TestJudgeCluster(t *testing.T) {
	t.Parallel()
	deleting := clusterAt("deleting", 3*time.Hour, "2026-11-30T10:00:00Z")
	deleting.DeletionTimestamp = at(time.Minute)
	run := func(name, expires string) *rayv1.RayCluster {
		rc := clusterAt(name, 9*time.Hour, expires)
		rc.Labels[LabelKind] = KindRun
		return rc
	}
	tests := []struct {
		name    string
		rc      *rayv1.RayCluster
		opts    JudgeOptions
		collect bool
		reason  string
	}{
		{"expired", clusterAt("old", 9*time.Hour, "2026-11-30T11:55:00Z"), JudgeOptions{}, true,
			"interactive, expired 5m0s ago (2026-11-30T11:55:00Z)"},
		{"live", clusterAt("live", time.Hour, "2026-11-30T15:00:00Z"), JudgeOptions{}, false,
			"interactive, expires in 3h0m0s (2026-11-30T15:00:00Z)"},
		{"no expiry", clusterAt("bare", 48*time.Hour, ""), JudgeOptions{}, false,
			"interactive, no valid raystep.dev/expires-at annotation (\"\"): `raystep down bare` deletes it"},
		{"bad expiry", clusterAt("bad", 48*time.Hour, "tomorrow"), JudgeOptions{}, false,
			"interactive, no valid raystep.dev/expires-at annotation (\"tomorrow\"): `raystep down bad` deletes it"},
		{"young", clusterAt("young", time.Minute, "2026-11-30T11:00:00Z"), JudgeOptions{OlderThan: time.Hour}, false, "younger than 1h0m0s"},
		{"deleting", deleting, JudgeOptions{}, false, "already being deleted"},
		{"run expired", run("run-a", "2026-11-30T11:55:00Z"), JudgeOptions{}, true, "run-scoped, expired 5m0s ago (2026-11-30T11:55:00Z)"},
		{"run live", run("run-b", "2026-11-30T15:00:00Z"), JudgeOptions{}, false, "run-scoped, expires in 3h0m0s (2026-11-30T15:00:00Z)"},
		{"run no expiry", run("run-c", ""), JudgeOptions{}, false,
			"run-scoped, no valid raystep.dev/expires-at annotation (\"\"): `raystep down run-c` deletes it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := JudgeCluster(tt.rc, gcNow, tt.opts)
			if diff := cmp.Diff([]any{tt.collect, tt.reason}, []any{v.Collect, v.Reason}); diff != "" {
				t.Errorf("collect, reason (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCollectClusters: gc deletes the expired interactive RayCluster and
// keeps the live one.
func TestCollectClusters(t *testing.T) {
	t.Parallel()
	old, live := clusterAt("old", 9*time.Hour, "2026-11-30T11:00:00Z"), clusterAt("live", time.Hour, "2026-11-30T15:00:00Z")
	f := newFakes(t, old, live)
	var reported []string
	err := Collect(t.Context(), kubeapitest.Kube(f.kube), kubeapitest.Ray(f.ray), []Verdict{JudgeCluster(old, gcNow, JudgeOptions{}), JudgeCluster(live, gcNow, JudgeOptions{})}, false,
		func(r Result) { reported = append(reported, string(r.Action)+" "+r.Object()) })
	if err != nil {
		t.Fatal(err)
	}
	list, err := f.ray.RayV1().RayClusters(testNS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, rc := range list.Items {
		left = append(left, rc.Name)
	}
	want := []any{[]string{"deleted RayCluster " + testNS + "/old", "kept RayCluster " + testNS + "/live"}, []string{"live"}}
	if diff := cmp.Diff(want, []any{reported, left}); diff != "" {
		t.Errorf("reported, left (-want +got):\n%s", diff)
	}
}
