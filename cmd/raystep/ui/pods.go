package ui

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
)

// The Ray pods of raystep's clusters add two things to a record: the
// reason of any pod's problem (an image that does not pull, a pod no node
// takes), and the GPUs the pods hold and since when, from which the page
// counts GPU-hours.

// labelRayCluster is the label KubeRay puts on every pod of a RayCluster.
const labelRayCluster = "ray.io/cluster"

// pod is what the store keeps of one Ray pod.
type pod struct {
	cluster string // namespace/RayCluster
	problem string // "Reason: message", or ""
	span    GPUSpan
}

// GPUSpan is GPUs a pod holds since a time.
type GPUSpan struct {
	GPUs  int
	Since time.Time
}

// podOf reads a pod; ok is false for one of no RayCluster.
func podOf(p *corev1.Pod) (pod, bool) {
	rc := p.Labels[labelRayCluster]
	if rc == "" {
		return pod{}, false
	}
	out := pod{cluster: p.Namespace + "/" + rc}
	if reason, msg := kuberay.PodProblem(p); reason != "" {
		out.problem = reason + ": " + msg
	}
	if p.Status.StartTime != nil && p.Status.Phase == corev1.PodRunning {
		for _, c := range p.Spec.Containers {
			for name, q := range c.Resources.Limits {
				if strings.HasSuffix(string(name), "/gpu") {
					out.span.GPUs += int(q.Value())
				}
			}
		}
		out.span.Since = p.Status.StartTime.Time
	}
	return out, true
}

// podKey names a pod in the store.
func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// putPod records p and refreshes the records of its cluster.
func (s *Store) putPod(key string, p pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods == nil {
		s.pods = map[string]pod{}
	}
	old, had := s.pods[key]
	s.pods[key] = p
	if had && old == p {
		return
	}
	s.refreshLocked(p.cluster)
	if had && old.cluster != p.cluster {
		s.refreshLocked(old.cluster)
	}
}

// removePod forgets a pod, banking the GPU time it held, and refreshes
// the records of its cluster.
func (s *Store) removePod(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[key]
	if !ok {
		return
	}
	delete(s.pods, key)
	if p.span.GPUs > 0 {
		if s.banked == nil {
			s.banked = map[string]time.Duration{}
		}
		s.banked[p.cluster] += time.Duration(p.span.GPUs) * time.Since(p.span.Since)
	}
	s.refreshLocked(p.cluster)
}

// clusterOf is the namespace/RayCluster of r's pods, or "" while it has
// none (a RayJob whose RayCluster KubeRay has not made, a local head).
func clusterOf(r *Record) string {
	switch {
	case r.local():
		return ""
	case r.ClusterKind == fleet.KindStep:
		if r.RayCluster == "" {
			return ""
		}
		return r.Namespace + "/" + r.RayCluster
	}
	return r.Namespace + "/" + r.Name
}

// withPodsLocked returns r with what its pods say.
func (s *Store) withPodsLocked(r *Record) *Record {
	c := clusterOf(r)
	if c == "" {
		return r
	}
	out := *r
	out.Problem, out.GPUSpans, out.GPUBanked = "", nil, s.banked[c]
	var problems []string
	for _, p := range s.pods {
		if p.cluster != c {
			continue
		}
		if p.problem != "" {
			problems = append(problems, p.problem)
		}
		if p.span.GPUs > 0 {
			out.GPUSpans = append(out.GPUSpans, p.span)
		}
	}
	sort.Strings(problems)
	out.Problem = strings.Join(problems, "; ")
	return &out
}

// refreshLocked recomputes the records of cluster and tells subscribers
// of those that changed.
func (s *Store) refreshLocked(cluster string) {
	for key, r := range s.rows {
		if clusterOf(r) != cluster {
			continue
		}
		next := s.withPodsLocked(r)
		if next.Problem == r.Problem && len(next.GPUSpans) == len(r.GPUSpans) && next.GPUBanked == r.GPUBanked {
			continue
		}
		s.rows[key] = next
		s.notifyLocked(Change{Key: key, Record: next})
	}
}

// podInformer builds an informer of the Ray pods (src) whose events keep
// s's pods.
func (s *Store) podInformer(src source) cache.SharedIndexInformer {
	return src.newInformer(func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			if info, ok := podOf(p); ok {
				s.putPod(podKey(p), info)
			}
		}
	}, func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			s.removePod(podKey(p))
		}
	})
}
