package kuberay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// Verdict is what `raystep gc` decides about one RayJob or interactive
// RayCluster.
type Verdict struct {
	// Job is the RayJob judged; nil when Cluster is set.
	Job *rayv1.RayJob
	// Cluster is the interactive RayCluster judged (JudgeCluster).
	Cluster *rayv1.RayCluster
	// Collect is true when the RayJob's step is gone and it may be deleted.
	Collect bool
	// Reason says why, for people.
	Reason string
}

// JudgeOptions are the thresholds of `raystep gc`.
type JudgeOptions struct {
	// OlderThan spares every RayJob created less than this long ago.
	OlderThan time.Duration
	// HeartbeatGrace is how long a step's heartbeat may lapse before its
	// RayJob counts as abandoned; zero means DefaultHeartbeatGrace.
	HeartbeatGrace time.Duration
}

// Judge decides whether job's step is gone. A RayJob whose step renews
// its heartbeat Lease (lease, nil when there is none) is never collected;
// one whose held Lease went stale for longer than the grace (or than the
// Lease's own leaseDurationSeconds, if longer) is, unless
// its job finished (then KubeRay's TTL frees the cluster and the rules
// below apply). A RayJob with a released Lease (its step ended and kept
// the cluster), or without one (an older raystep; one younger than the
// grace is spared, its step may not have written it yet), is collected
// when the job finished and its debugging window, ttlSecondsAfterFinished,
// has passed, it runs past activeDeadlineSeconds, or it is still
// provisioning past preRunningDeadlineSeconds (timeouts.provision).
// Nothing younger than o.OlderThan is collected.
func Judge(job *rayv1.RayJob, lease *coordinationv1.Lease, now time.Time, o JudgeOptions) Verdict {
	v := Verdict{Job: job}
	age := now.Sub(job.CreationTimestamp.Time)
	switch {
	case job.DeletionTimestamp != nil:
		return judgeDeleted(v, lease, now, o.grace())
	case age < o.OlderThan:
		v.Reason = fmt.Sprintf("younger than %s", o.OlderThan)
		return v
	}
	if hv, decided := judgeHeartbeat(v, lease, now, o.grace()); decided {
		return hv
	}
	st := job.Status
	switch {
	case st.JobDeploymentStatus == rayv1.JobDeploymentStatusValidationFailed:
		v.Collect, v.Reason = true, "failed validation: "+oneLine(st.Message, 200)
	case finished(job):
		v = judgeFinished(v, now)
	case st.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning:
		v = judgeDeadline(v, now, job.Spec.ActiveDeadlineSeconds, "running", "timeouts.run")
	default:
		v = judgeDeadline(v, now, job.Spec.PreRunningDeadlineSeconds, "provisioning", "timeouts.provision")
	}
	return v
}

func (o JudgeOptions) grace() time.Duration {
	if o.HeartbeatGrace > 0 {
		return o.HeartbeatGrace
	}
	return DefaultHeartbeatGrace
}

// finished reports whether KubeRay considers the RayJob's job over.
func finished(job *rayv1.RayJob) bool {
	st := job.Status.JobDeploymentStatus
	return st == rayv1.JobDeploymentStatusComplete || st == rayv1.JobDeploymentStatusFailed
}

// judgeHeartbeat decides by the step's heartbeat Lease when it can: a
// fresh one keeps the RayJob, a stale one collects it unless its job
// finished, a missing one keeps it while it is younger than the grace.
// Otherwise (released, or missing on an old RayJob) it leaves the verdict
// to the deadlines and TTL.
func judgeHeartbeat(v Verdict, lease *coordinationv1.Lease, now time.Time, grace time.Duration) (Verdict, bool) {
	if lease != nil && !ownedBy(lease, v.Job) {
		lease = nil // a previous RayJob's, about to be garbage-collected
	}
	if lease == nil {
		if age := now.Sub(v.Job.CreationTimestamp.Time); age < grace {
			v.Reason = fmt.Sprintf("no heartbeat yet, created %s ago (grace %s)", age.Round(time.Second), grace)
			return v, true
		}
		return v, false
	}
	holder := ptrValue(lease.Spec.HolderIdentity)
	if holder == "" {
		return v, false // released: the step ended and kept its cluster
	}
	grace = max(grace, time.Duration(ptrValue(lease.Spec.LeaseDurationSeconds))*time.Second)
	since := now.Sub(renewTime(lease))
	if since <= grace {
		v.Reason = fmt.Sprintf("step alive: heartbeat %s ago from %s", since.Round(time.Second), holder)
		return v, true
	}
	if finished(v.Job) {
		return v, false
	}
	v.Collect = true
	v.Reason = fmt.Sprintf("step gone: no heartbeat from %s for %s (grace %s), %s", holder, since.Round(time.Second), grace, deploymentStatus(v.Job))
	return v, true
}

// ownedBy reports whether lease is the heartbeat of job (and not of an
// earlier RayJob of the same name).
func ownedBy(lease *coordinationv1.Lease, job *rayv1.RayJob) bool {
	for _, o := range lease.OwnerReferences {
		if o.Kind == "RayJob" && o.UID == job.UID {
			return true
		}
	}
	return false
}

// renewTime is when the Lease was last renewed (or acquired, or created).
// Where the API server recorded it (managedFields: when each writer last
// changed the Lease, by the server's clock, to the second) that is what
// counts, at the end of its second: the step's own renewTime comes from
// the step's clock, and a step whose clock runs behind gc's by more than
// the grace would look dead while it renews (judge with ServerNow then).
func renewTime(l *coordinationv1.Lease) time.Time {
	var recorded time.Time
	for _, m := range l.ManagedFields {
		if m.Time != nil && m.Time.After(recorded) {
			recorded = m.Time.Time
		}
	}
	if !recorded.IsZero() {
		return recorded.Add(time.Second)
	}
	switch {
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time
	}
	return l.CreationTimestamp.Time
}

// judgeDeleted judges a RayJob already being deleted. KubeRay holds one
// with its finalizer until it has asked the dashboard to stop the Ray
// job, and while the job has not ended and the RayCluster stands it
// builds that dashboard client from the token Secret: if the Secret is
// gone (deleted by hand or by a policy, or by the garbage collector ahead
// of the RayCluster) KubeRay never lets go, and the RayCluster, a
// dependent, stays as long as the RayJob does, its pods and GPUs too.
// Such a RayJob, held past the grace with its step gone (no fresh
// heartbeat), is collected: Collect makes its token Secret again. Any
// other RayJob being deleted is left to the deletion under way.
func judgeDeleted(v Verdict, lease *coordinationv1.Lease, now time.Time, grace time.Duration) Verdict {
	j := v.Job
	v.Reason = "already being deleted"
	since := now.Sub(j.DeletionTimestamp.Time)
	secret := AuthSecret(j)
	if !heldByKubeRay(j) || secret == nil || since < grace {
		return v
	}
	if hv, decided := judgeHeartbeat(v, lease, now, grace); decided && !hv.Collect {
		return hv // its step is alive, and its teardown sees to it
	}
	v.Collect = true
	v.Reason = fmt.Sprintf("deleted %s ago but still held by KubeRay (finalizer %s), which needs the token Secret %s to let it go",
		since.Round(time.Second), kuberayJobFinalizer, secret.Name)
	return v
}

// heldByKubeRay reports whether the deleted RayJob j waits for KubeRay
// alone: it has KubeRay's finalizer and no longer the garbage
// collector's foregroundDeletion, so nothing else will delete its
// RayCluster first.
func heldByKubeRay(j *rayv1.RayJob) bool {
	return slices.Contains(j.Finalizers, kuberayJobFinalizer) && !slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents)
}

// judgeFinished collects a finished RayJob once its TTL has passed.
func judgeFinished(v Verdict, now time.Time) Verdict {
	st := v.Job.Status
	end := v.Job.CreationTimestamp.Time
	if st.EndTime != nil {
		end = st.EndTime.Time
	}
	what := string(st.JobDeploymentStatus)
	if st.Reason != "" {
		what += " (" + string(st.Reason) + ")"
	}
	keep := time.Duration(v.Job.Spec.TTLSecondsAfterFinished) * time.Second
	if left := end.Add(keep).Sub(now); left > 0 {
		v.Reason = fmt.Sprintf("%s, kept for debugging %s more (ttlSecondsAfterFinished)", what, left.Round(time.Second))
		return v
	}
	v.Collect, v.Reason = true, fmt.Sprintf("%s %s ago", what, now.Sub(end).Round(time.Second))
	return v
}

// judgeDeadline collects a RayJob in phase past its deadline, counted from
// the operator's startTime (or the creation when it never started).
func judgeDeadline(v Verdict, now time.Time, seconds *int32, phase, field string) Verdict {
	start := v.Job.CreationTimestamp.Time
	if v.Job.Status.StartTime != nil {
		start = v.Job.Status.StartTime.Time
	}
	if seconds == nil || *seconds <= 0 {
		v.Reason = phase + " without a deadline"
		return v
	}
	deadline := start.Add(time.Duration(*seconds) * time.Second)
	if now.Before(deadline) {
		v.Reason = fmt.Sprintf("%s on time (%s left of %s)", phase, deadline.Sub(now).Round(time.Second), field)
		return v
	}
	v.Collect = true
	v.Reason = fmt.Sprintf("%s %s past %s (%ds)", phase, now.Sub(deadline).Round(time.Second), field, *seconds)
	return v
}

// Action is what Collect did with one RayJob.
type Action string

// The actions Collect reports.
const (
	Deleted     Action = "deleted"
	Kept        Action = "kept"
	WouldDelete Action = "would delete" // dry run
	WouldKeep   Action = "would keep"   // dry run
	// Unblocked: the RayJob was already being deleted and KubeRay held
	// it; its token Secret was made again, so KubeRay lets it go.
	Unblocked    Action = "unblocked"
	WouldUnblock Action = "would unblock" // dry run
	// Skipped: the RayJob was already gone, or was replaced by another of
	// the same name (its UID changed) since it was judged.
	Skipped Action = "skipped"
	// Failed: the delete failed; Result.Err says why.
	Failed Action = "failed"
)

// Result is one verdict and what Collect did about it.
type Result struct {
	Verdict
	// Action is what Collect did about the verdict, or would do in a dry run.
	Action Action
	// Note says why a RayJob was skipped, or what unblocked it.
	Note string
	// Err is the delete's error when Action is Failed.
	Err error
}

// Collect deletes the RayJobs of the collectable verdicts (foreground: the
// garbage collector removes their RayClusters, pods and heartbeat Leases)
// unless dryRun, and reports every verdict, kept or not, through report. A
// RayJob changed since it was judged (its UID differs) or already gone is
// skipped. A collectable RayJob already being deleted (judgeDeleted) is
// unblocked instead: its token Secret is made again. The error joins the
// failed deletes.
func Collect(ctx context.Context, kube kubeapi.Interface, ray kubeapi.RayInterface, verdicts []Verdict, dryRun bool, report func(Result)) error {
	var errs []error
	for _, v := range verdicts {
		r := Result{Verdict: v}
		switch {
		case !v.Collect && dryRun:
			r.Action = WouldKeep
		case !v.Collect:
			r.Action = Kept
		case dryRun && v.deleting():
			r.Action = WouldUnblock
		case dryRun:
			r.Action = WouldDelete
		case v.deleting():
			r = unblock(ctx, kube, v)
			if r.Err != nil {
				errs = append(errs, r.Err)
			}
		default:
			r = deleteJudged(ctx, ray, v)
			if r.Err != nil {
				errs = append(errs, r.Err)
			}
		}
		report(r)
	}
	return errors.Join(errs...)
}

// Object names what v judged, e.g. "RayJob ml-ads/raystep-...".
func (v Verdict) Object() string {
	if v.Cluster != nil {
		return "RayCluster " + v.Cluster.Namespace + "/" + v.Cluster.Name
	}
	return "RayJob " + v.Job.Namespace + "/" + v.Job.Name
}

// deleting reports whether v judged a RayJob already being deleted.
func (v Verdict) deleting() bool { return v.Job != nil && v.Job.DeletionTimestamp != nil }

// AnnotationMadeByGC marks a token Secret that raystep gc made again to
// unblock its RayJob, so that a second gc run tells it from one that was
// there all along.
const AnnotationMadeByGC = "raystep.dev/made-by-gc"

// unblock makes the token Secret of the deleted RayJob of v again, with a
// fresh token and owned by the RayJob, so that KubeRay can build its
// dashboard client and drop its finalizer; the garbage collector then
// removes the RayCluster, its pods and the Secret. Ray, started with the
// old token, may refuse KubeRay's request to stop the job with the new
// one; KubeRay lets the RayJob go whether that request succeeds or not,
// and the RayCluster's deletion ends the job. A Secret that exists means
// something else holds the RayJob, unless gc made it (AnnotationMadeByGC).
func unblock(ctx context.Context, kube kubeapi.Interface, v Verdict) Result {
	s := AuthSecret(v.Job)
	token, err := NewAuthToken()
	if err != nil {
		return Result{Verdict: v, Action: Failed, Err: err}
	}
	s.Data = map[string][]byte{AuthTokenKey: []byte(token)}
	s.Annotations = map[string]string{AnnotationMadeByGC: "true"}
	_, err = kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		return Result{Verdict: v, Action: Unblocked, Note: "made its token Secret " + s.Name + " again, so KubeRay lets it go"}
	case apierrors.IsAlreadyExists(err):
		return Result{Verdict: v, Action: Skipped, Note: existingSecretNote(ctx, kube, s)}
	}
	return Result{Verdict: v, Action: Failed, Err: fmt.Errorf("make the token Secret %s/%s of %s again: %w", s.Namespace, s.Name, v.Object(), err)}
}

// existingSecretNote says why unblock did not make the token Secret s: an
// earlier gc run made it (two runs at once, or KubeRay has not reconciled
// the RayJob since), or it was there all along, and something else holds
// the RayJob.
func existingSecretNote(ctx context.Context, kube kubeapi.Interface, s *corev1.Secret) string {
	found, err := kube.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil || found.Annotations[AnnotationMadeByGC] != "true" {
		return "its token Secret " + s.Name + " exists, so something else holds it: the KubeRay operator's log says what"
	}
	return fmt.Sprintf("raystep gc made its token Secret %s again at %s, and KubeRay lets it go once it reconciles the RayJob; if it still holds it, the KubeRay operator's log says why",
		s.Name, found.CreationTimestamp.UTC().Format(time.RFC3339))
}

// deleteJudged deletes the RayJob or RayCluster of v in the foreground,
// if it is still the one judged.
func deleteJudged(ctx context.Context, ray kubeapi.RayInterface, v Verdict) Result {
	fg := metav1.DeletePropagationForeground
	opts := metav1.DeleteOptions{PropagationPolicy: &fg}
	var uid types.UID
	var err error
	kind, _, _ := strings.Cut(v.Object(), " ")
	if v.Cluster != nil {
		uid = v.Cluster.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
		err = ray.RayV1().RayClusters(v.Cluster.Namespace).Delete(ctx, v.Cluster.Name, opts)
	} else {
		uid = v.Job.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
		err = ray.RayV1().RayJobs(v.Job.Namespace).Delete(ctx, v.Job.Name, opts)
	}
	switch {
	case err == nil:
		return Result{Verdict: v, Action: Deleted}
	case apierrors.IsNotFound(err):
		return Result{Verdict: v, Action: Skipped, Note: "already gone"}
	case apierrors.IsConflict(err):
		return Result{Verdict: v, Action: Skipped, Note: "replaced by another " + kind + " of the same name since it was judged (UID " + string(uid) + " is gone)"}
	}
	return Result{Verdict: v, Action: Failed, Err: fmt.Errorf("delete %s: %w", v.Object(), err)}
}
