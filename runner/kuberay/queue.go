package kuberay

import (
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kueue's Workload, which Kueue makes for each queued RayJob and labels
// with the RayJob's UID.
var workloadsResource = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

const labelJobUID = "kueue.x-k8s.io/job-uid"

// suspended reports whether the RayJob waits in a queue: spec.suspend is
// set (raystep creates a queued RayJob so; Kueue clears it on admission)
// or KubeRay is still suspending it or has.
func suspended(job *rayv1.RayJob) bool {
	st := job.Status.JobDeploymentStatus
	return job.Spec.Suspend || st == rayv1.JobDeploymentStatusSuspending || st == rayv1.JobDeploymentStatusSuspended
}

// queueName names the RayJob's Kueue LocalQueue for people.
func queueName(job *rayv1.RayJob) string {
	if q := job.Labels[LabelQueueName]; q != "" {
		return "Kueue LocalQueue " + q
	}
	return "no queue (spec.suspend is set)"
}

// pending is what Kueue says of a Workload that is not admitted: the
// reason and message of its QuotaReserved (else Admitted) condition when
// it is False, e.g. "Pending: couldn't assign flavors to pod set gpu:
// insufficient unused quota for nvidia.com/gpu in flavor gpu-a100, 1 more
// needed"; "" when it says nothing.
func pending(wl *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, want := range []string{"QuotaReserved", "Admitted"} {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != want || m["status"] != "False" {
				continue
			}
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			if reason == "" && msg == "" {
				continue
			}
			return oneLine(reason+": "+msg, 400)
		}
	}
	return ""
}

// queueNote is the notice about a queued RayJob, with what Kueue says of
// its Workload when that is known.
func queueNote(job *rayv1.RayJob, why string) string {
	s := fmt.Sprintf("RayJob %s/%s: queued in %s", job.Namespace, job.Name, queueName(job))
	if why != "" {
		s += ": " + why
	}
	return s
}

// admittedNote is the notice once the queue admitted the RayJob.
func admittedNote(job *rayv1.RayJob, waited time.Duration) string {
	return fmt.Sprintf("RayJob %s/%s: admitted by %s after %s in the queue", job.Namespace, job.Name, queueName(job), waited.Round(time.Second))
}

// queueState is what the monitor knows of the RayJob's time in a queue.
type queueState struct {
	said     string    // the last status notice told
	since    time.Time // first seen queued; zero if never
	admitted bool      // told that the queue admitted it
	watching bool      // the Workload watch runs
	why      string    // what Kueue last said of the Workload
	// workloads are the names of the RayJob's Workloads that exist;
	// teardown waits until Kueue and the garbage collector removed them.
	workloads map[string]bool
}

// tellStatus tells people of a new deployment status, or of the queue the
// RayJob waits in and why, each once and again when it changes; m.mu is
// held.
func (m *monitor) tellStatus(a *afterUnlock, job *rayv1.RayJob) {
	text := fmt.Sprintf("RayJob %s/%s: %s", m.ns, m.name, deploymentStatus(job))
	switch {
	case suspended(job) && !m.isReady:
		if m.q.since.IsZero() {
			m.q.since = m.clock.Now()
		}
		text = queueNote(job, m.q.why)
		if !m.q.watching && m.dyn != nil && job.UID != "" && job.Labels[LabelQueueName] != "" {
			m.q.watching, a.watchWorkloads = true, string(job.UID)
		}
	case !m.q.since.IsZero() && !m.q.admitted:
		m.q.admitted = true
		a.info(admittedNote(job, m.clock.Now().Sub(m.q.since)))
	}
	if m.q.admitted && job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusNew {
		return // "admitted" said it: KubeRay starts over from New
	}
	if text != m.q.said {
		m.q.said = text
		a.info(text)
	}
}

// followCluster starts watching the pods of the RayJob's RayCluster once
// KubeRay named it. A suspended RayJob's name is not followed (KubeRay
// names a cluster it never creates before it suspends the RayJob); one
// that changes before the cluster was ready (a queue suspended the RayJob
// and admitted it again) replaces the watch. m.mu is held.
func (m *monitor) followCluster(a *afterUnlock, job *rayv1.RayJob) {
	rc := job.Status.RayClusterName
	if rc == "" || rc == m.podsFor || suspended(job) || m.isReady && m.podsFor != "" {
		return
	}
	if m.podsFor != "" {
		a.stopPods, m.podsStop = m.podsStop, nil
		m.pods, m.podsSync = map[string]*corev1.Pod{}, false
	}
	m.podsFor, a.watchPods = rc, rc
}

// watchWorkloads starts watching the Kueue Workload of the RayJob with
// the given UID, for what Kueue says while it is queued.
func (m *monitor) watchWorkloads(uid string) {
	res := m.dyn.Resource(workloadsResource).Namespace(m.ns)
	sel := labels.SelectorFromSet(labels.Set{labelJobUID: uid}).String()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(workloadsResource.GroupVersion().WithKind("Workload"))
	m.run(selected(res, func(o *metav1.ListOptions) { o.LabelSelector = sel }), m.dyn, obj, m.onWorkload, nil)
}

// onWorkload tells what Kueue says of a Workload that is not admitted.
func (m *monitor) onWorkload(obj any, deleted bool) {
	wl, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	why := pending(wl)
	m.update(func(a *afterUnlock) {
		if m.q.workloads == nil {
			m.q.workloads = map[string]bool{}
		}
		if deleted {
			delete(m.q.workloads, wl.GetName())
		} else {
			m.q.workloads[wl.GetName()] = true
		}
		m.broadcast()
		if why == "" || deleted {
			return
		}
		m.q.why = why
		if m.job != nil && suspended(m.job) && !m.isReady {
			m.tellStatus(a, m.job)
		}
	})
}
