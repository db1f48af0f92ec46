package kuberay

import (
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kindRayCluster is the monitor's kind when it follows an interactive
// RayCluster instead of a step's RayJob: the same pod, event and
// permission checks, with the RayCluster's own status in place of the
// RayJob's.
const kindRayCluster = "RayCluster"

// newClusterMonitor returns a monitor of the interactive RayCluster
// ns/name; it does nothing until start.
func (i *Interactive) newClusterMonitor(ns, name string) *monitor {
	m := newMonitor(i.Kube, i.Ray, ns, name, i.clock(), i.UnschedulableGrace, i.Notify)
	m.kind = kindRayCluster
	return m
}

// subject names what the monitor follows, for messages.
func (m *monitor) subject() string {
	if m.kind == "" {
		return "RayJob"
	}
	return m.kind
}

// user names who made what the monitor follows, for messages.
func (m *monitor) user() string {
	if m.kind == "" {
		return "step"
	}
	return "command"
}

// watchRayCluster watches the RayCluster (byName selects it) and, from
// the start, its pods: their names are known before KubeRay makes them.
func (m *monitor) watchRayCluster(byName string) {
	clusters := m.ray.RayV1().RayClusters(m.ns)
	m.run(selected(clusters, func(o *metav1.ListOptions) { o.FieldSelector = byName }),
		m.ray, &rayv1.RayCluster{}, m.onRayCluster, func() { m.set(func() { m.jobSync = true }) })
	m.set(func() { m.podsFor = m.name })
	m.watchPods(m.name)
}

// onRayCluster records the RayCluster, tells its state when it changes
// and warns about pods KubeRay could not create.
func (m *monitor) onRayCluster(obj any, deleted bool) {
	rc, ok := obj.(*rayv1.RayCluster)
	if !ok || rc.Name != m.name {
		return
	}
	m.update(func(a *afterUnlock) {
		if deleted {
			m.jobGone = true
		} else {
			m.rc = rc
			if text := fmt.Sprintf("RayCluster %s/%s: %s", m.ns, m.name, clusterState(rc)); text != m.q.said {
				m.q.said = text
				a.info(text)
			}
		}
		if c := meta.FindStatusCondition(rc.Status.Conditions, string(rayv1.RayClusterReplicaFailure)); c != nil && c.Status == metav1.ConditionTrue {
			msg := c.Reason + ": " + c.Message
			m.warnLocked(a, "RayCluster "+rc.Name+": "+msg, "replica:"+msg)
		}
		m.broadcast()
	})
}

// clusterState names a RayCluster's state for people.
func clusterState(rc *rayv1.RayCluster) string {
	switch {
	case rc.DeletionTimestamp != nil:
		return "Deleting"
	case clusterReady(rc):
		return "ready"
	case rc.Status.State != "":
		return string(rc.Status.State)
	}
	return "created, waiting for its pods"
}

// clusterReady reports whether KubeRay says every pod of the RayCluster
// runs and is ready (state ready, or RayClusterProvisioned once it was).
func clusterReady(rc *rayv1.RayCluster) bool {
	return rc.Status.State == rayv1.Ready ||
		meta.IsStatusConditionTrue(rc.Status.Conditions, string(rayv1.RayClusterProvisioned))
}

// rayClusterState fails an interactive RayCluster that someone else is
// deleting while raystep waits for it.
func rayClusterState(rc *rayv1.RayCluster) error {
	if rc.DeletionTimestamp == nil {
		return nil
	}
	return &ClusterError{RayJob: rc.Namespace + "/" + rc.Name, Kind: kindRayCluster, Reason: "Deleted",
		Message: "the RayCluster is being deleted by someone other than this command"}
}
