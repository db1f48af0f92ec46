package kuberay

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var gcNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// rayJobAt is a raystep RayJob created ago before gcNow with deadlines of
// 15m (provision) and 1h (run) and a 10m TTL.
func rayJobAt(name string, ago time.Duration, st rayv1.RayJobStatus) *rayv1.RayJob {
	return &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID(name + "-uid"),
			CreationTimestamp: metav1.NewTime(gcNow.Add(-ago)),
			Labels: map[string]string{LabelManagedBy: ManagedByRaystep, LabelOwner: "ads-ranking", LabelKind: "train",
				LabelRunID: "run-1", LabelStep: "train"},
			Annotations: map[string]string{AnnotationGPUs: "a100-80gb=2", AnnotationStepKey: "train"}},
		Spec: rayv1.RayJobSpec{PreRunningDeadlineSeconds: ptr(int32(900)), ActiveDeadlineSeconds: ptr(int32(3600)),
			TTLSecondsAfterFinished: 600, ShutdownAfterJobFinishes: true},
		Status: st,
	}
}

func at(ago time.Duration) *metav1.Time { return ptr(metav1.NewTime(gcNow.Add(-ago))) }

func TestJudge(t *testing.T) {
	t.Parallel()
	deleting := rayJobAt("deleting", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	deleting.DeletionTimestamp = at(time.Minute)
	noDeadline := rayJobAt("no-deadline", 48*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, StartTime: at(48 * time.Hour)})
	noDeadline.Spec.ActiveDeadlineSeconds = nil
	tests := []struct {
		name      string
		job       *rayv1.RayJob
		olderThan time.Duration
		collect   bool
		reason    string
	}{
		{"complete past TTL", rayJobAt("a", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete,
			EndTime: at(time.Hour)}), 0, true, "Complete 1h0m0s ago"},
		{"complete within TTL", rayJobAt("b", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete,
			EndTime: at(4 * time.Minute)}), 0, false, "Complete, kept for debugging 6m0s more (ttlSecondsAfterFinished)"},
		{"failed deadline", rayJobAt("c", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed,
			Reason: rayv1.DeadlineExceeded, EndTime: at(30 * time.Minute)}), 0, true, "Failed (DeadlineExceeded) 30m0s ago"},
		{"validation failed", rayJobAt("d", time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusValidationFailed,
			Message: "bad spec"}), 0, true, "failed validation: bad spec"},
		{"waiting past provision timeout", rayJobAt("e", time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting,
			StartTime: at(time.Hour)}), 0, true, "provisioning 45m0s past timeouts.provision (900s)"},
		{"never picked up by an operator", rayJobAt("f", time.Hour, rayv1.RayJobStatus{}), 0, true,
			"provisioning 45m0s past timeouts.provision (900s)"},
		{"initializing on time", rayJobAt("g", 5*time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing,
			StartTime: at(5 * time.Minute)}), 0, false, "provisioning on time (10m0s left of timeouts.provision)"},
		{"running on time", rayJobAt("h", 50*time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning,
			StartTime: at(50 * time.Minute)}), 0, false, "running on time (10m0s left of timeouts.run)"},
		{"running past deadline", rayJobAt("i", 3*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning,
			StartTime: at(3 * time.Hour)}), 0, true, "running 2h0m0s past timeouts.run (3600s)"},
		{"running without deadline", noDeadline, 0, false, "running without a deadline"},
		{"younger than --older-than", rayJobAt("j", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete,
			EndTime: at(time.Hour)}), 24 * time.Hour, false, "younger than 24h0m0s"},
		{"being deleted", deleting, 0, false, "already being deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Judge(tt.job, gcNow, tt.olderThan)
			if diff := cmp.Diff([]any{tt.collect, tt.reason}, []any{v.Collect, v.Reason}); diff != "" {
				t.Errorf("collect, reason (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCollect(t *testing.T) {
	t.Parallel()
	old := rayJobAt("old", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	live := rayJobAt("live", 5*time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, StartTime: at(5 * time.Minute)})
	for _, dry := range []bool{true, false} {
		f := newFakes(t, old, live)
		verdicts := []Verdict{Judge(old, gcNow, 0), Judge(live, gcNow, 0)}
		var reported []string
		err := Collect(t.Context(), f.ray, verdicts, dry, func(v Verdict, err error) { reported = append(reported, v.Job.Name) })
		if err != nil {
			t.Fatal(err)
		}
		list, _ := f.ray.RayV1().RayJobs(testNS).List(t.Context(), metav1.ListOptions{})
		var left []string
		for _, j := range list.Items {
			left = append(left, j.Name)
		}
		want := []string{"live"}
		if dry {
			want = []string{"live", "old"}
		}
		if diff := cmp.Diff([]any{[]string{"old"}, want}, []any{reported, left}); diff != "" {
			t.Errorf("dry-run=%v: reported, left (-want +got):\n%s", dry, diff)
		}
	}
}
