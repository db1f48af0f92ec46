package kuberay

import (
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
)

// LabelCluster is the label KubeRay puts on every pod of a RayCluster,
// naming it.
const LabelCluster = labelCluster

// PodTrouble returns why pod cannot run as a step would fail on it
// (Unschedulable, ImagePullBackOff, CrashLoopBackOff, PodFailed, ...)
// and what Kubernetes said, or two empty strings: the same judgement the
// step's watch makes, without its grace for Unschedulable.
func PodTrouble(pod *corev1.Pod, now time.Time) (reason, message string) {
	if perr, _ := podProblem(pod, now, 0, ""); perr != nil {
		return perr.Reason, perr.Message
	}
	return "", ""
}

// IsHeadPod reports whether pod is a Ray head pod.
func IsHeadPod(pod *corev1.Pod) bool { return isHead(pod) }

// DashboardPort is the dashboard's port on rc's head pod.
func DashboardPort(rc *rayv1.RayCluster) uint16 {
	if p, err := strconv.ParseUint(rc.Status.Endpoints["dashboard"], 10, 16); err == nil && p > 0 {
		return uint16(p)
	}
	return dashboardPort
}

// EventTime is when the event ev last happened.
func EventTime(ev *corev1.Event) time.Time { return eventTime(ev) }
