package kuberay

import (
	"context"
	"fmt"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
)

// afterUnlock is what the monitor decided to do while it held its lock
// and does once it released it: notes for people (Notify may block on a
// slow Dagster, or call back into the monitor) and a pod watch to start.
type afterUnlock struct {
	notes          []note
	watchPods      string             // the RayCluster whose pods to watch, if any
	stopPods       context.CancelFunc // ends the watch of a RayCluster left behind
	watchWorkloads string             // the RayJob UID whose Kueue Workload to watch
}

// note is one notification.
type note struct {
	warn bool // a warning, else information
	msg  string
}

func (a *afterUnlock) info(msg string) { a.notes = append(a.notes, note{msg: msg}) }
func (a *afterUnlock) warn(msg string) { a.notes = append(a.notes, note{warn: true, msg: msg}) }

// update runs f under the lock, then does what f left for after it.
func (m *monitor) update(f func(a *afterUnlock)) {
	var a afterUnlock
	func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		f(&a)
	}()
	if a.stopPods != nil {
		a.stopPods()
	}
	if a.watchPods != "" {
		m.watchPods(a.watchPods)
	}
	if a.watchWorkloads != "" {
		m.watchWorkloads(a.watchWorkloads)
	}
	for _, n := range a.notes {
		if n.warn {
			m.notify.warn(n.msg)
		} else {
			m.notify.info(n.msg)
		}
	}
}

// warnOnce notifies msg once per key.
func (m *monitor) warnOnce(msg, key string) {
	m.update(func(a *afterUnlock) { m.warnLocked(a, msg, key) })
}

// warnLocked queues msg once per key; m.mu is held.
func (m *monitor) warnLocked(a *afterUnlock, msg, key string) {
	if m.warned[key] {
		return
	}
	m.warned[key] = true
	a.warn(msg)
}

func (m *monitor) onJob(obj any, deleted bool) {
	job, ok := obj.(*rayv1.RayJob)
	if !ok || job.Name != m.name {
		return
	}
	m.update(func(a *afterUnlock) {
		if deleted {
			m.jobGone = true
		} else {
			m.job = job
			m.tellStatus(a, job)
		}
		m.followCluster(a, job)
		if msg := replicaFailure(job); msg != "" {
			m.warnLocked(a, "RayCluster "+job.Status.RayClusterName+": "+msg, "replica:"+msg)
		}
		m.broadcast()
	})
}

func (m *monitor) onPod(obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[labelCluster] == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if pod.Labels[labelCluster] != m.podsFor {
		return
	}
	if c := disruptionOf(pod); c != nil && m.disruption == nil && !m.leaving && !m.disruptedEarly[pod.Name] {
		if m.isReady {
			m.disruption = &ClusterError{RayJob: m.ns + "/" + m.name, Kind: m.kind, Reason: ReasonPreempted, Pod: pod.Name,
				Message: strings.TrimSuffix(c.Reason+": "+c.Message, ": ")}
		} else { // KubeRay replaces it before the job runs: not the job's preemption
			if m.disruptedEarly == nil {
				m.disruptedEarly = map[string]bool{}
			}
			m.disruptedEarly[pod.Name] = true
		}
	}
	if deleted {
		delete(m.pods, pod.Name)
	} else {
		m.pods[pod.Name] = pod
	}
	m.broadcast()
}

// disruptionOf returns pod's DisruptionTarget condition when it is true:
// Kubernetes sets it on a pod it is about to end for a reason not the
// pod's own (PreemptionByScheduler, EvictionByEvictionAPI,
// DeletionByTaintManager, DeletionByPodGC after its node is gone,
// TerminationByKubelet).
func disruptionOf(pod *corev1.Pod) *corev1.PodCondition {
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// onEvent reports each distinct warning about this RayJob, its RayCluster
// and its pods (whose names all start with the RayJob's name, see concerns).
func (m *monitor) onEvent(obj any, deleted bool) {
	ev, ok := obj.(*corev1.Event)
	if !ok || deleted || ev.Type != corev1.EventTypeWarning || !strings.HasPrefix(ev.InvolvedObject.Name, m.name) {
		return
	}
	m.update(func(a *afterUnlock) {
		if !m.concerns(ev.InvolvedObject.Kind, ev.InvolvedObject.Name) {
			return
		}
		if fatalEvent(ev.Reason, ev.Message) && m.fatal == nil && !eventTime(ev).Before(m.started.Add(-eventSkew)) {
			m.fatal = &ClusterError{RayJob: m.ns + "/" + m.name, Kind: m.kind, Reason: ev.Reason,
				Message: ev.InvolvedObject.Kind + " " + ev.InvolvedObject.Name + ": " + ev.Message}
			m.broadcast()
		}
		key := ev.InvolvedObject.Kind + "/" + ev.Reason + "/" + ev.Message
		m.warnLocked(a, fmt.Sprintf("%s %s: %s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, oneLine(ev.Message, 400)), key)
	})
}

// deploymentStatus names the RayJob's deployment status for people.
func deploymentStatus(job *rayv1.RayJob) string {
	st := job.Status
	s := string(st.JobDeploymentStatus)
	if s == "" {
		s = "created, waiting for the KubeRay operator"
	}
	if st.Reason != "" {
		s += " (" + string(st.Reason) + ")"
	}
	if st.JobDeploymentStatus == rayv1.JobDeploymentStatusWaiting {
		s += ": cluster ready for the job"
	}
	return s
}

// fatalEvent reports whether a KubeRay warning means the RayCluster will
// not come up until someone changes something: failing at once beats
// waiting for timeouts.provision. (A warning that may clear by itself,
// such as a quota that frees up, only shows as a warning.) A Ray pod the
// API server refused for Pod Security or as invalid is fatal too: KubeRay
// only tries the same spec again and again.
func fatalEvent(reason, message string) bool {
	switch reason {
	case "AutoscalerServiceAccountNotFound", "InvalidRayClusterSpec", "InvalidRayClusterMetadata",
		"InvalidRayJobSpec", "InvalidRayJobMetadata":
		return true
	case "FailedToCreateHeadPod", "FailedToCreateWorkerPod", "FailedCreateHeadPod", "FailedCreateWorkerPod":
		return strings.Contains(message, "violates PodSecurity") || strings.Contains(message, " is invalid: ")
	}
	return false
}

// eventSkew tolerates clock differences between raystep and the API
// server when telling a fresh event from one a previous attempt saw.
const eventSkew = 30 * time.Second

// eventTime is when an event last happened.
func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

// kuberayPrefixMax is how much of a RayCluster's name (or of NAME-GROUP)
// KubeRay keeps at the start of a pod's name.
const kuberayPrefixMax = 50

// concerns reports whether a warning about the object kind/name is about
// what the monitor follows: the RayJob (or interactive RayCluster) itself,
// the RayCluster KubeRay made for the RayJob (NAME-xxxxx), the head
// service, or a pod of that RayCluster (CLUSTER-head[-xxxxx],
// CLUSTER-GROUP-worker-xxxxx, each prefix cut to 50 characters as KubeRay
// cuts it). Sharing the start of a name is not enough: the events of
// alice-dev2 and of alice-dev-2 are not alice-dev's. Kinds raystep does
// not know keep that rule. m.mu is held.
func (m *monitor) concerns(kind, name string) bool {
	if name == m.name {
		return true
	}
	cluster, groups := m.followed()
	switch kind {
	case "RayJob":
		return false
	case "RayCluster":
		if cluster != "" {
			return name == cluster
		}
		// Before the RayJob names its RayCluster: KubeRay's NAME-xxxxx.
		return m.kind == "" && generatedFrom(name, m.name, 5)
	case "Service":
		return cluster != "" && name == cluster+"-head-svc"
	case "Pod":
		if _, ok := m.pods[name]; ok {
			return true
		}
		if cluster == "" {
			return false
		}
		head := cut(cluster, kuberayPrefixMax) + "-head"
		if name == head || generatedFrom(name, head, 5) {
			return true
		}
		for _, g := range groups {
			if generatedFrom(name, cut(cluster+"-"+g, kuberayPrefixMax)+"-worker", 5) {
				return true
			}
		}
		return false
	}
	return strings.HasPrefix(name, m.name)
}

// followed is the RayCluster the monitor follows, once known, and its
// worker groups. m.mu is held.
func (m *monitor) followed() (cluster string, groups []string) {
	var spec *rayv1.RayClusterSpec
	switch {
	case m.rc != nil:
		cluster, spec = m.rc.Name, &m.rc.Spec
	case m.kind == kindRayCluster:
		cluster = m.name
	case m.job != nil:
		cluster, spec = m.job.Status.RayClusterName, m.job.Spec.RayClusterSpec
	}
	if cluster == "" {
		cluster = m.podsFor
	}
	if spec != nil {
		for _, g := range spec.WorkerGroupSpecs {
			groups = append(groups, g.GroupName)
		}
	}
	return cluster, groups
}

// generatedFrom reports whether name is prefix, a dash and n generated
// characters (lower-case letters and digits), as Kubernetes' generateName
// and KubeRay's random suffixes make them.
func generatedFrom(name, prefix string, n int) bool {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok || len(rest) != n {
		return false
	}
	for _, r := range rest {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// cut is s cut to at most n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
