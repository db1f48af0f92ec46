package kuberay

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
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

// heldAt is a running RayJob with token authentication (its Secret
// NAME-ray-auth), deleted ago before gcNow and holding finalizers.
func heldAt(name string, ago time.Duration, finalizers ...string) *rayv1.RayJob {
	j := rayJobAt(name, 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, StartTime: at(2 * time.Hour)})
	j.Spec.RayClusterSpec = &rayv1.RayClusterSpec{AuthOptions: &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, SecretName: ptr(AuthSecretName(name))}}
	j.DeletionTimestamp, j.Finalizers = at(ago), finalizers
	return j
}

// leaseOf is job's heartbeat Lease held by holder ("" released), renewed
// ago before gcNow.
func leaseOf(job *rayv1.RayJob, holder string, ago time.Duration) *coordinationv1.Lease {
	renew := metav1.NewMicroTime(gcNow.Add(-ago))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, Labels: map[string]string{LabelManagedBy: ManagedByRaystep},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: job.Name, UID: job.UID}}},
		Spec: coordinationv1.LeaseSpec{RenewTime: &renew},
	}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

func withDuration(l *coordinationv1.Lease, seconds int32) *coordinationv1.Lease {
	l.Spec.LeaseDurationSeconds = &seconds
	return l
}

func TestJudge(t *testing.T) {
	t.Parallel()
	deleting := rayJobAt("deleting", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	deleting.DeletionTimestamp = at(time.Minute)
	noDeadline := rayJobAt("no-deadline", 48*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, StartTime: at(48 * time.Hour)})
	noDeadline.Spec.ActiveDeadlineSeconds = nil
	running := func(name string, ago time.Duration) *rayv1.RayJob {
		return rayJobAt(name, ago, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, StartTime: at(ago)})
	}
	killed := running("killed", 20*time.Minute)
	alive := running("alive", 5*time.Hour)
	kept := rayJobAt("kept", time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(4 * time.Minute)})
	keptRunning := running("kept-running", 20*time.Minute)
	finishedKilled := rayJobAt("finished-killed", time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(4 * time.Minute)})
	provisioning := rayJobAt("provisioning", 10*time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing, StartTime: at(10 * time.Minute)})
	previous := running("previous", 20*time.Minute)
	previousLease := leaseOf(previous, "host/1", 15*time.Minute)
	previousLease.OwnerReferences[0].UID = "an-earlier-rayjob"
	young := running("young", 30*time.Second)
	fresh := running("fresh", 50*time.Minute)
	held := heldAt("held", 10*time.Minute, kuberayJobFinalizer)
	noAuth := heldAt("no-auth", 10*time.Minute, kuberayJobFinalizer)
	noAuth.Spec.RayClusterSpec = nil
	tests := []struct {
		name    string
		job     *rayv1.RayJob
		lease   *coordinationv1.Lease
		opts    JudgeOptions
		collect bool
		reason  string
	}{
		{"complete past TTL", rayJobAt("a", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete,
			EndTime: at(time.Hour)}), nil, JudgeOptions{}, true, "Complete 1h0m0s ago"},
		{"complete within TTL", rayJobAt("b", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete,
			EndTime: at(4 * time.Minute)}), nil, JudgeOptions{}, false, "Complete, kept for debugging 6m0s more (ttlSecondsAfterFinished)"},
		{"failed deadline", rayJobAt("c", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed,
			Reason: rayv1.DeadlineExceeded, EndTime: at(30 * time.Minute)}), nil, JudgeOptions{}, true, "Failed (DeadlineExceeded) 30m0s ago"},
		{"validation failed", rayJobAt("d", 10*time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusValidationFailed,
			Message: "bad spec"}), nil, JudgeOptions{}, true, "failed validation: bad spec"},
		{"waiting past provision timeout", rayJobAt("e", time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting,
			StartTime: at(time.Hour)}), nil, JudgeOptions{}, true, "provisioning 45m0s past timeouts.provision (900s)"},
		{"never picked up by an operator", rayJobAt("f", time.Hour, rayv1.RayJobStatus{}), nil, JudgeOptions{}, true,
			"provisioning 45m0s past timeouts.provision (900s)"},
		{"initializing on time", rayJobAt("g", 6*time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing,
			StartTime: at(5 * time.Minute)}), nil, JudgeOptions{}, false, "provisioning on time (10m0s left of timeouts.provision)"},
		{"running on time", running("h", 50*time.Minute), nil, JudgeOptions{}, false, "running on time (10m0s left of timeouts.run)"},
		{"running past deadline", running("i", 3*time.Hour), nil, JudgeOptions{}, true, "running 2h0m0s past timeouts.run (3600s)"},
		{"running without deadline", noDeadline, nil, JudgeOptions{}, false, "running without a deadline"},
		{"younger than --older-than", rayJobAt("j", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete,
			EndTime: at(time.Hour)}), nil, JudgeOptions{OlderThan: 24 * time.Hour}, false, "younger than 24h0m0s"},
		{"being deleted", deleting, nil, JudgeOptions{}, false, "already being deleted"},

		// A RayJob being deleted that KubeRay holds: it needs the token Secret.
		{"held by KubeRay past the grace", held, nil, JudgeOptions{}, true,
			"deleted 10m0s ago but still held by KubeRay (finalizer ray.io/rayjob-finalizer), which needs the token Secret held-ray-auth to let it go"},
		{"held, its step gone", held, leaseOf(held, "h/1", 10*time.Minute), JudgeOptions{}, true,
			"deleted 10m0s ago but still held by KubeRay (finalizer ray.io/rayjob-finalizer), which needs the token Secret held-ray-auth to let it go"},
		{"held, its step alive: its teardown sees to it", held, leaseOf(held, "h/1", 10*time.Second), JudgeOptions{}, false,
			"step alive: heartbeat 10s ago from h/1"},
		{"held within the grace", heldAt("recent", 4*time.Minute, kuberayJobFinalizer), nil, JudgeOptions{}, false, "already being deleted"},
		{"dependents first: the garbage collector deletes the RayCluster", heldAt("fg", 10*time.Minute, metav1.FinalizerDeleteDependents, kuberayJobFinalizer),
			nil, JudgeOptions{}, false, "already being deleted"},
		{"held by another finalizer", heldAt("other", 10*time.Minute, "example.com/keep"), nil, JudgeOptions{}, false, "already being deleted"},
		{"held without token authentication", noAuth, nil, JudgeOptions{}, false, "already being deleted"},

		// The heartbeat.
		{"killed step: heartbeat stale, deadline far", killed, leaseOf(killed, "dagster-7f/4242", 12*time.Minute), JudgeOptions{}, true,
			"step gone: no heartbeat from dagster-7f/4242 for 12m0s (grace 5m0s), Running"},
		{"killed while provisioning", provisioning, leaseOf(provisioning, "h/1", 6*time.Minute), JudgeOptions{}, true,
			"step gone: no heartbeat from h/1 for 6m0s (grace 5m0s), Initializing"},
		{"short grace by flag", killed, leaseOf(killed, "h/1", 3*time.Second), JudgeOptions{HeartbeatGrace: 2 * time.Second}, true,
			"step gone: no heartbeat from h/1 for 3s (grace 2s), Running"},
		{"the Lease's own duration wins over a shorter grace", killed, withDuration(leaseOf(killed, "h/1", 30*time.Second), 45),
			JudgeOptions{HeartbeatGrace: 2 * time.Second}, false, "step alive: heartbeat 30s ago from h/1"},
		{"--older-than still spares", killed, leaseOf(killed, "h/1", 12*time.Minute), JudgeOptions{OlderThan: time.Hour}, false,
			"younger than 1h0m0s"},
		{"alive step past its deadline is kept", alive, leaseOf(alive, "dagster-7f/4242", 10*time.Second), JudgeOptions{}, false,
			"step alive: heartbeat 10s ago from dagster-7f/4242"},
		{"heartbeat exactly at the grace is fresh", killed, leaseOf(killed, "h/1", 5*time.Minute), JudgeOptions{}, false,
			"step alive: heartbeat 5m0s ago from h/1"},
		{"released, finished within TTL: kept for debugging", kept, leaseOf(kept, "", 4*time.Minute), JudgeOptions{}, false,
			"Complete, kept for debugging 6m0s more (ttlSecondsAfterFinished)"},
		{"released, running: by its deadline", keptRunning, leaseOf(keptRunning, "", 15*time.Minute), JudgeOptions{}, false,
			"running on time (40m0s left of timeouts.run)"},
		{"stale but finished: by the TTL", finishedKilled, leaseOf(finishedKilled, "h/1", 10*time.Minute), JudgeOptions{}, false,
			"Complete, kept for debugging 6m0s more (ttlSecondsAfterFinished)"},
		{"an earlier RayJob's Lease does not count", previous, previousLease, JudgeOptions{}, false,
			"running on time (40m0s left of timeouts.run)"},
		{"no Lease yet", young, nil, JudgeOptions{}, false, "no heartbeat yet, created 30s ago (grace 5m0s)"},
		{"no Lease on an old RayJob: by its deadline", fresh, nil, JudgeOptions{}, false, "running on time (10m0s left of timeouts.run)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Judge(tt.job, tt.lease, gcNow, tt.opts)
			if diff := cmp.Diff([]any{tt.collect, tt.reason}, []any{v.Collect, v.Reason}); diff != "" {
				t.Errorf("collect, reason (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCollect: every verdict is reported with what was done; a RayJob
// replaced since it was judged (UID precondition conflict) or already gone
// is reported as skipped, not deleted.
func TestCollect(t *testing.T) {
	t.Parallel()
	old := rayJobAt("old", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	live := rayJobAt("live", 5*time.Minute, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, StartTime: at(5 * time.Minute)})
	replaced := rayJobAt("replaced", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	gone := rayJobAt("gone", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	tests := []struct {
		dry  bool
		want []string
		left []string
	}{
		{true, []string{"would delete old", "would keep live", "would delete replaced", "would delete gone"}, []string{"live", "old", "replaced"}},
		{false, []string{"deleted old", "kept live", "skipped replaced: replaced by another RayJob of the same name since it was judged (UID replaced-uid is gone)",
			"skipped gone: already gone"}, []string{"live", "replaced"}},
	}
	for _, tt := range tests {
		f := newFakes(t, old, live, replaced)
		f.ray.PrependReactor("delete", "rayjobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.DeleteAction).GetName() != "replaced" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewConflict(rayv1.Resource("rayjobs"), "replaced", errors.New("Precondition failed: UID in precondition: replaced-uid, UID in object meta: other"))
		})
		var verdicts []Verdict
		for _, j := range []*rayv1.RayJob{old, live, replaced, gone} {
			verdicts = append(verdicts, Judge(j, leaseOf(j, "", time.Hour), gcNow, JudgeOptions{}))
		}
		var reported []string
		err := Collect(t.Context(), kubeapitest.Kube(f.kube), kubeapitest.Ray(f.ray), verdicts, tt.dry, func(r Result) {
			line := string(r.Action) + " " + r.Job.Name
			if r.Note != "" {
				line += ": " + r.Note
			}
			reported = append(reported, line)
		})
		if err != nil {
			t.Fatal(err)
		}
		list, _ := f.ray.RayV1().RayJobs(testNS).List(t.Context(), metav1.ListOptions{})
		var left []string
		for _, j := range list.Items {
			left = append(left, j.Name)
		}
		if diff := cmp.Diff([]any{tt.want, tt.left}, []any{reported, left}); diff != "" {
			t.Errorf("dry-run=%v: reported, left (-want +got):\n%s", tt.dry, diff)
		}
	}
}

// TestCollectUnblocksHeldRayJobs: a collectable RayJob already being
// deleted is not deleted again: its token Secret is made again, with a
// fresh token and owned by the RayJob, so that KubeRay lets it go. One
// whose Secret exists is skipped, saying so; a dry run makes nothing.
func TestCollectUnblocksHeldRayJobs(t *testing.T) {
	t.Parallel()
	for _, dry := range []bool{true, false} {
		held := heldAt("held", 10*time.Minute, kuberayJobFinalizer)
		other := heldAt("other", 10*time.Minute, kuberayJobFinalizer)
		again := heldAt("again", 10*time.Minute, kuberayJobFinalizer)
		f := newFakes(t, held, other, again)
		f.ray.PrependReactor("delete", "rayjobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			t.Errorf("Collect deleted %s, which is already being deleted", a.(k8stesting.DeleteAction).GetName())
			return true, nil, nil
		})
		kept := AuthSecret(other)
		kept.Data = map[string][]byte{AuthTokenKey: []byte("the step's token")}
		if _, err := f.kube.CoreV1().Secrets(testNS).Create(t.Context(), kept, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// An earlier gc run (or one beside this) made again's Secret.
		made := AuthSecret(again)
		made.Annotations = map[string]string{AnnotationMadeByGC: "true"}
		made.CreationTimestamp = metav1.NewTime(gcNow.Add(-3 * time.Second))
		if _, err := f.kube.CoreV1().Secrets(testNS).Create(t.Context(), made, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var reported []string
		err := Collect(t.Context(), kubeapitest.Kube(f.kube), kubeapitest.Ray(f.ray), []Verdict{Judge(held, nil, gcNow, JudgeOptions{}), Judge(other, nil, gcNow, JudgeOptions{}), Judge(again, nil, gcNow, JudgeOptions{})}, dry,
			func(r Result) {
				reported = append(reported, strings.TrimSpace(string(r.Action)+" "+r.Job.Name+": "+r.Note))
			})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"unblocked held: made its token Secret held-ray-auth again, so KubeRay lets it go",
			"skipped other: its token Secret other-ray-auth exists, so something else holds it: the KubeRay operator's log says what",
			"skipped again: raystep gc made its token Secret again-ray-auth again at " + gcNow.Add(-3*time.Second).UTC().Format(time.RFC3339) +
				", and KubeRay lets it go once it reconciles the RayJob; if it still holds it, the KubeRay operator's log says why"}
		if dry {
			want = []string{"would unblock held:", "would unblock other:", "would unblock again:"}
		}
		if diff := cmp.Diff(want, reported); diff != "" {
			t.Errorf("dry-run=%v: reported (-want +got):\n%s", dry, diff)
		}
		s, err := f.kube.CoreV1().Secrets(testNS).Get(t.Context(), "held-ray-auth", metav1.GetOptions{})
		switch {
		case dry && !apierrors.IsNotFound(err):
			t.Errorf("dry run: Secret held-ray-auth: %v, want none made", err)
		case dry:
		case err != nil:
			t.Errorf("Secret held-ray-auth after Collect: %v", err)
		default:
			owner := []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "held", UID: held.UID}}
			if diff := cmp.Diff(owner, s.OwnerReferences); diff != "" || len(s.Data[AuthTokenKey]) != 64 || s.Annotations[AnnotationMadeByGC] != "true" {
				t.Errorf("the Secret made again: owners (-want +got):\n%s\ntoken of %d bytes, want 64 hex digits; annotations %v, want %s", diff, len(s.Data[AuthTokenKey]), s.Annotations, AnnotationMadeByGC)
			}
		}
		if got, _ := f.kube.CoreV1().Secrets(testNS).Get(t.Context(), "other-ray-auth", metav1.GetOptions{}); got == nil || string(got.Data[AuthTokenKey]) != "the step's token" {
			t.Errorf("dry-run=%v: the existing Secret was changed: %+v", dry, got)
		}
	}
}

// TestCollectReportsFailures: a delete the API server refuses is reported
// as failed and returned, and the other verdicts are still acted on.
func TestCollectReportsFailures(t *testing.T) {
	t.Parallel()
	a := rayJobAt("a", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	b := rayJobAt("b", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, EndTime: at(time.Hour)})
	f := newFakes(t, a, b)
	f.ray.PrependReactor("delete", "rayjobs", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.(k8stesting.DeleteAction).GetName() != "a" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(rayv1.Resource("rayjobs"), "a", errors.New("RBAC: access denied"))
	})
	var actions []Action
	err := Collect(t.Context(), kubeapitest.Kube(f.kube), kubeapitest.Ray(f.ray), []Verdict{Judge(a, nil, gcNow, JudgeOptions{}), Judge(b, nil, gcNow, JudgeOptions{})}, false,
		func(r Result) { actions = append(actions, r.Action) })
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "delete RayJob "+testNS+"/a") {
		t.Errorf("Collect = %v, want the Forbidden delete of a", err)
	}
	if diff := cmp.Diff([]Action{Failed, Deleted}, actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// TestJudgeByTheServersRecord: the API server's record of the last
// renewal (managedFields, its clock, to the second) outweighs renewTime,
// which a step with a slow clock writes in the past; a Lease the server
// recorded long ago is stale whatever its renewTime says.
func TestJudgeByTheServersRecord(t *testing.T) {
	t.Parallel()
	job := rayJobAt("skewed", 2*time.Hour, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, StartTime: at(time.Hour)})
	recorded := func(ago time.Duration) []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{{Manager: "raystep", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(ago)}}
	}
	slow := leaseOf(job, "h/1", time.Hour)
	slow.ManagedFields = recorded(2 * time.Second)
	if v := Judge(job, slow, gcNow, JudgeOptions{HeartbeatGrace: 30 * time.Second}); v.Collect {
		t.Errorf("a step renewing with a clock an hour slow: collected (%s)", v.Reason)
	}
	fast := leaseOf(job, "h/1", -time.Hour)
	fast.ManagedFields = recorded(10 * time.Minute)
	if v := Judge(job, fast, gcNow, JudgeOptions{HeartbeatGrace: 30 * time.Second}); !v.Collect {
		t.Errorf("a step gone 10 minutes whose clock ran an hour fast: kept (%s)", v.Reason)
	}
}
