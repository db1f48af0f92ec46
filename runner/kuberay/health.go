package kuberay

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/raystep/raystep/runner"
	corev1 "k8s.io/api/core/v1"
)

// ErrClusterFailed is wrapped by every error that reports a RayJob or Ray
// pod that will not recover: the step fails with an infrastructure error
// (exit 3) naming the reason and the pod's own message.
var ErrClusterFailed = errors.New("ray cluster failed")

// ClusterError reports why a step's RayJob cannot run or stopped running.
type ClusterError struct {
	// RayJob is "namespace/name" of the RayJob, or of the RayCluster
	// when Kind says so.
	RayJob string
	// Kind is "RayCluster" for an interactive cluster; empty means RayJob.
	Kind string
	// Reason is the short cause: a RayJob deployment status or failure
	// reason (ValidationFailed, DeadlineExceeded, ...) or a pod problem
	// (Unschedulable, ImagePullBackOff, CrashLoopBackOff, ...).
	Reason string
	// Pod names the pod the problem is on, if any.
	Pod string
	// Message is what Kubernetes or KubeRay said, e.g. the image that
	// would not pull or the scheduler's explanation.
	Message string
}

// Error names the RayJob, the pod, the reason and the message.
func (e *ClusterError) Error() string {
	var b strings.Builder
	kind := e.Kind
	if kind == "" {
		kind = "RayJob"
	}
	fmt.Fprintf(&b, "%s %s", kind, e.RayJob)
	if e.Pod != "" {
		fmt.Fprintf(&b, ": pod %s", e.Pod)
	}
	fmt.Fprintf(&b, ": %s", e.Reason)
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", oneLine(e.Message, 600))
	}
	return b.String()
}

// ReasonPreempted is the Reason of a ClusterError for a pod lost to a
// disruption, or a RayJob suspended by its queue, after the cluster was
// ready.
const ReasonPreempted = "Preempted"

// Is matches ErrClusterFailed, and runner.ErrPreempted for a preemption.
func (e *ClusterError) Is(target error) bool {
	return target == ErrClusterFailed || target == runner.ErrPreempted && e.Reason == ReasonPreempted
}

// oneLine squeezes a message onto one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// readiness is what the RayJob's status says about the cluster.
type readiness int

const (
	notReady readiness = iota
	// queued: the RayJob is suspended (Kueue has not admitted it, or
	// KubeRay is suspending it): no failure, no cluster yet.
	queued
	ready
)

// jobState judges a RayJob's status: queued while it is suspended (see
// suspended), ready once KubeRay waits for a job (or, on a restarted
// step, already runs or ran one). A Failed RayJob whose Ray job failed (AppFailed)
// is not an infrastructure failure: Ray reports it, and on a restarted
// step the cluster counts as ready so the runner can attach and read it.
func jobState(job *rayv1.RayJob) (readiness, error) {
	st := job.Status
	fail := func(reason string) error {
		return &ClusterError{RayJob: job.Namespace + "/" + job.Name, Reason: reason, Message: st.Message}
	}
	if job.DeletionTimestamp != nil {
		return notReady, &ClusterError{RayJob: job.Namespace + "/" + job.Name, Reason: "Deleted",
			Message: "the RayJob is being deleted by someone other than this step"}
	}
	switch st.JobDeploymentStatus {
	case rayv1.JobDeploymentStatusWaiting, rayv1.JobDeploymentStatusComplete:
		return ready, nil
	case rayv1.JobDeploymentStatusRunning:
		if job.Spec.Suspend {
			return queued, nil // KubeRay is about to suspend it
		}
		return ready, nil
	case rayv1.JobDeploymentStatusValidationFailed:
		return notReady, fail(string(rayv1.JobDeploymentStatusValidationFailed))
	case rayv1.JobDeploymentStatusFailed:
		if st.Reason == rayv1.AppFailed {
			return ready, nil
		}
		reason := string(st.Reason)
		if reason == "" {
			reason = string(rayv1.JobDeploymentStatusFailed)
		}
		return notReady, fail(reason)
	}
	if suspended(job) {
		return queued, nil
	}
	return notReady, nil
}

// imageProblems are container waiting reasons that do not fix themselves.
var imageProblems = []string{
	"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull",
	"CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff",
}

// podProblem returns why pod cannot run, or nil. An Unschedulable pod
// only counts once it has been so for grace (a cluster autoscaler may be
// adding a node); wait then says when to look again. A container that
// waits for the Secret named authSecret is no problem either: raystep
// creates that token Secret right after the RayJob (it must be owned by
// it), so a fast kubelet may look for it first, and retries.
func podProblem(pod *corev1.Pod, now time.Time, grace time.Duration, authSecret string) (err *ClusterError, wait time.Duration) {
	problem := func(reason, msg string) *ClusterError {
		return &ClusterError{Pod: pod.Name, Reason: reason, Message: msg}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return problem("PodFailed", strings.TrimSpace(pod.Status.Reason+" "+pod.Status.Message)), 0
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		if left := grace - now.Sub(c.LastTransitionTime.Time); grace > 0 && left > 0 {
			return nil, left
		}
		return problem(corev1.PodReasonUnschedulable, c.Message), 0
	}
	statuses := slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && slices.Contains(imageProblems, w.Reason) {
			if w.Reason == "CreateContainerConfigError" && waitsForSecret(w.Message, authSecret) {
				continue
			}
			msg := w.Message
			if w.Reason == "CrashLoopBackOff" {
				msg = crashMessage(cs)
			}
			return problem(w.Reason, "container "+cs.Name+": "+msg), 0
		}
	}
	return nil, 0
}

// waitsForSecret reports whether msg is the kubelet's "not found" for the
// Secret named name: `secret "NAME" not found` from its watch-based secret
// manager, `secrets "NAME" not found` when it asked the API server.
func waitsForSecret(msg, name string) bool {
	return msg == fmt.Sprintf("secret %q not found", name) || msg == fmt.Sprintf("secrets %q not found", name)
}

// crashMessage describes a crash-looping container by its last exit.
func crashMessage(cs corev1.ContainerStatus) string {
	msg := cs.State.Waiting.Message
	if t := cs.LastTerminationState.Terminated; t != nil {
		msg = fmt.Sprintf("%s (last exit code %d, %s", msg, t.ExitCode, t.Reason)
		if t.Message != "" {
			msg += ": " + t.Message
		}
		msg += ")"
	}
	return strings.TrimSpace(fmt.Sprintf("%s, %d restarts", msg, cs.RestartCount))
}

// isHead reports whether pod is a Ray head pod.
func isHead(pod *corev1.Pod) bool {
	return pod.Labels[labelNodeType] == string(rayv1.HeadNode)
}

// replicaFailure returns the RayCluster's ReplicaFailure condition message
// the RayJob's status carries (a pod KubeRay could not create: quota, pod
// security admission, ...), or "".
func replicaFailure(job *rayv1.RayJob) string {
	for _, c := range job.Status.RayClusterStatus.Conditions {
		if c.Type == string(rayv1.RayClusterReplicaFailure) && c.Status == "True" {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}
