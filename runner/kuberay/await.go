package kuberay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
)

// view is a consistent copy of what the monitor knows.
type view struct {
	job      *rayv1.RayJob
	rc       *rayv1.RayCluster // the interactive RayCluster
	jobGone  bool
	pods     []*corev1.Pod
	podsSync bool
	jobSync  bool
	ready    bool
	leaving  bool
	// workloads are the RayJob's Kueue Workloads that exist (only known
	// while the Workload watch runs).
	workloads []string
	denied    error
	blind     bool
	fatal     error
	// disruption is the first pod lost to a disruption once the cluster
	// was ready (see monitor.onPod).
	disruption *ClusterError
}

// snapshot returns the current view and the channel closed at the next
// change.
func (m *monitor) snapshot() (view, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := view{job: m.job, rc: m.rc, jobGone: m.jobGone, podsSync: m.podsSync, jobSync: m.jobSync, ready: m.isReady, leaving: m.leaving, denied: m.denied, blind: m.blind, fatal: m.fatal, disruption: m.disruption,
		workloads: slices.Sorted(maps.Keys(m.q.workloads))}
	for _, k := range slices.Sorted(maps.Keys(m.pods)) {
		v.pods = append(v.pods, m.pods[k])
	}
	return v, m.changed
}

// await calls check with the latest view after every change until it
// returns done or an error, or ctx ends. check may ask to be called again
// after a delay on the monitor's clock even without a change. check runs
// without the monitor's lock, so it may call the monitor.
func (m *monitor) await(ctx context.Context, check func(v view) (done bool, err error, again time.Duration)) error {
	for {
		v, changed := m.snapshot()
		done, err, again := check(v)
		if done || err != nil {
			return err
		}
		if err := m.sleep(ctx, changed, again); err != nil {
			return err
		}
	}
}

// sleep waits for changed, for again on the monitor's clock when it is
// positive, or for ctx.
func (m *monitor) sleep(ctx context.Context, changed <-chan struct{}, again time.Duration) error {
	var timer chan struct{}
	if again > 0 {
		timer = make(chan struct{})
		stop := m.clock.AfterFunc(again, func() { close(timer) })
		defer stop()
	}
	select {
	case <-changed:
	case <-timer:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-m.ctx.Done():
		return fmt.Errorf("%s %s/%s: no longer watched", m.subject(), m.ns, m.name)
	}
	return nil
}

// problem returns the first infrastructure failure v shows, or nil and
// when to look again (an Unschedulable pod within its grace, measured on
// the monitor's clock). Once the cluster was ready, a broken worker is
// only a warning: Ray may carry on without it (KubeRay replaces it); a
// broken head or RayJob is fatal.
func (m *monitor) problem(v view) (error, time.Duration) {
	if v.leaving {
		return nil, 0
	}
	if v.denied != nil {
		return v.denied, 0
	}
	if v.disruption != nil {
		return v.disruption, 0
	}
	if v.fatal != nil && !v.ready {
		return v.fatal, 0
	}
	if v.jobGone {
		return &ClusterError{RayJob: m.ns + "/" + m.name, Kind: m.kind, Reason: "Deleted",
			Message: "the " + m.subject() + " was deleted by someone other than this " + m.user()}, 0
	}
	if v.rc != nil {
		if err := rayClusterState(v.rc); err != nil {
			return err, 0
		}
	}
	if v.job != nil {
		r, err := jobState(v.job)
		if err != nil {
			return err, 0
		}
		if r == queued && v.ready {
			return &ClusterError{RayJob: m.ns + "/" + m.name, Reason: ReasonPreempted, Message: fmt.Sprintf(
				"the RayJob was suspended after its cluster was ready (%s preempted or evicted it): KubeRay deletes the cluster and its Ray job", queueName(v.job))}, 0
		}
		if err := m.borrowedGone(v); err != nil {
			return err, 0
		}
	}
	var again time.Duration
	for _, p := range v.pods {
		perr, wait := podProblem(p, m.clock.Now(), m.grace, AuthSecretName(m.name))
		if wait > 0 && (again == 0 || wait < again) {
			again = wait
		}
		if perr == nil {
			continue
		}
		perr.RayJob, perr.Kind = m.ns+"/"+m.name, m.kind
		if v.ready && !isHead(p) {
			m.warnOnce(perr.Error(), "pod/"+p.Name+"/"+perr.Reason)
			continue
		}
		return perr, 0
	}
	return nil, again
}

// borrowedGone fails a step that borrows an interactive cluster (run
// --cluster) once that cluster's head pod is being deleted or gone after
// it was ready: its owner took it down, gc deleted it at its expiry, or
// someone deleted it by hand. The Ray job dies with the head; waiting for
// its dashboard to come back would wait out the outage bound. Not a
// preemption: deleting a cluster on purpose is no reason to retry.
func (m *monitor) borrowedGone(v view) error {
	borrowed := v.job.Spec.ClusterSelector[clusterSelectorKey]
	if borrowed == "" || !v.ready || !v.podsSync {
		return nil
	}
	var head *corev1.Pod
	for _, p := range v.pods {
		if isHead(p) {
			head = p
		}
	}
	what := "its head pod is gone"
	switch {
	case head == nil:
	case head.DeletionTimestamp != nil:
		what = "its head pod " + head.Name + " is terminating"
	default:
		return nil
	}
	return &ClusterError{RayJob: m.ns + "/" + m.name, Reason: "ClusterDeleted", Message: fmt.Sprintf(
		"RayCluster %s, which the step borrows, is going away (%s: raystep down, gc at its expiry, or a delete by hand); its Ray job goes with it",
		borrowed, what)}
}
