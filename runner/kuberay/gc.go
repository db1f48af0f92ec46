package kuberay

import (
	"context"
	"errors"
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Verdict is what `raystep gc` decides about one RayJob.
type Verdict struct {
	// Job is the RayJob judged.
	Job *rayv1.RayJob
	// Collect is true when the RayJob's step is gone and it may be deleted.
	Collect bool
	// Reason says why, for people.
	Reason string
}

// Judge decides whether job's step is gone: the job finished (and its
// debugging window, ttlSecondsAfterFinished, has passed), it runs past
// activeDeadlineSeconds, or it is still provisioning past
// preRunningDeadlineSeconds (timeouts.provision). A RayJob that is
// provisioning or running on time is never collected, nor one younger
// than olderThan. Everything Judge needs is on the RayJob raystep created:
// its deadlines, TTL and status times.
func Judge(job *rayv1.RayJob, now time.Time, olderThan time.Duration) Verdict {
	v := Verdict{Job: job}
	st := job.Status
	age := now.Sub(job.CreationTimestamp.Time)
	switch {
	case job.DeletionTimestamp != nil:
		v.Reason = "already being deleted"
	case age < olderThan:
		v.Reason = fmt.Sprintf("younger than %s", olderThan)
	case st.JobDeploymentStatus == rayv1.JobDeploymentStatusValidationFailed:
		v.Collect, v.Reason = true, "failed validation: "+oneLine(st.Message, 200)
	case st.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete || st.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed:
		v = judgeFinished(v, now)
	case st.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning:
		v = judgeDeadline(v, now, job.Spec.ActiveDeadlineSeconds, "running", "timeouts.run")
	default:
		v = judgeDeadline(v, now, job.Spec.PreRunningDeadlineSeconds, "provisioning", "timeouts.provision")
	}
	return v
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

// Collect deletes the RayJobs of the collectable verdicts (foreground: the
// garbage collector removes their RayClusters and pods) unless dryRun, and
// reports each through report. A RayJob changed since it was judged (its
// UID differs) or already gone is skipped.
func Collect(ctx context.Context, ray rayclient.Interface, verdicts []Verdict, dryRun bool, report func(v Verdict, err error)) error {
	var errs []error
	fg := metav1.DeletePropagationForeground
	for _, v := range verdicts {
		if !v.Collect {
			continue
		}
		var err error
		if !dryRun {
			uid := v.Job.UID
			err = ray.RayV1().RayJobs(v.Job.Namespace).Delete(ctx, v.Job.Name, metav1.DeleteOptions{
				PropagationPolicy: &fg, Preconditions: &metav1.Preconditions{UID: &uid}})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				err = nil
			}
			if err != nil {
				err = fmt.Errorf("delete RayJob %s/%s: %w", v.Job.Namespace, v.Job.Name, err)
				errs = append(errs, err)
			}
		}
		report(v, err)
	}
	return errors.Join(errs...)
}
