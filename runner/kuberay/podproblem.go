package kuberay

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodProblem returns why a Ray pod cannot run, as the runner judges it
// (Unschedulable, ImagePullBackOff, CrashLoopBackOff, a failed pod, ...)
// with Kubernetes' message, or empty strings when it has no problem. An
// Unschedulable pod counts at once: a viewer wants to see why it waits.
func PodProblem(pod *corev1.Pod) (reason, message string) {
	if p, _ := podProblem(pod, time.Time{}, 0, ""); p != nil {
		return p.Reason, p.Message
	}
	return "", ""
}
