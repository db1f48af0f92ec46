package schemas

import "fmt"

// Kueue's limits on a RayJob it admits, which its admission webhook
// enforces: every worker group and the head are one pod set each, at most
// eight, and "head" names the head's.
const (
	maxQueuedWorkerGroups = 7
	headPodSet            = "head"
)

// QueueFor returns the Kueue LocalQueue of a cluster with workers: that
// of its first GPU worker's type (its queue, else the profile's
// spec.queue), or spec.queue without GPU workers; "" means the step is not
// queued. Validation makes sure the GPU workers agree.
func (p *Profile) QueueFor(workers []WorkerGroup) string {
	for _, w := range workers {
		if gt, ok := p.Spec.GPUTypes[w.GPUType]; ok && w.GPUType != "" {
			return queueOr(gt.Queue, p.Spec.Queue)
		}
	}
	return p.Spec.Queue
}

func queueOr(q, def string) string {
	if q != "" {
		return q
	}
	return def
}

// queue checks a cluster that a Kueue queue will hold: its workers' GPU
// types agree on the queue, and Kueue can admit it (fixed size, at most
// seven worker groups, none named "head").
func (c *checker) queue(cluster map[string]any) {
	workers, _ := cluster["workers"].([]any)
	queue, first := c.profile.Spec.Queue, ""
	for i, w := range workers {
		wm, _ := w.(map[string]any)
		t, _ := wm["gpuType"].(string)
		gt, ok := c.profile.Spec.GPUTypes[t]
		if t == "" || !ok {
			continue
		}
		q := queueOr(gt.Queue, c.profile.Spec.Queue)
		if first == "" {
			queue, first = q, t
			continue
		}
		if q != queue {
			c.add(fmt.Sprintf("/spec/cluster/workers/%d/gpuType", i),
				"gpuType %q is queued in Kueue LocalQueue %q but gpuType %q of an earlier worker in %q: one step has one queue; use GPU types of one queue",
				t, q, first, queue)
		}
	}
	if queue == "" {
		return
	}
	why := fmt.Sprintf("Kueue LocalQueue %q (profile %s) admits", queue, c.profile.Metadata.Name)
	if len(workers) > maxQueuedWorkerGroups {
		c.add("/spec/cluster/workers", "%d worker groups: %s at most %d", len(workers), why, maxQueuedWorkerGroups)
	}
	for i, w := range workers {
		wm, _ := w.(map[string]any)
		base := fmt.Sprintf("/spec/cluster/workers/%d", i)
		if name, _ := wm["name"].(string); name == headPodSet {
			c.add(base+"/name", "%q is the head's name in Kueue: %s no worker group of that name", name, why)
		}
		if autoscaling(wm) {
			c.add(base, "autoscaling (minReplicas %s maxReplicas): %s fixed-size clusters only; set replicas alone", "!=", why)
		}
	}
}

// autoscaling reports whether a raw worker group may change size, as
// WorkerGroup.Autoscaling does for the decoded one.
func autoscaling(w map[string]any) bool {
	toInt32 := func(k string) *int32 {
		if n, ok := intOf(w[k]); ok {
			v := int32(n)
			return &v
		}
		return nil
	}
	lo, hi, _ := replicaRange(rawWorker{Replicas: toInt32("replicas"), MinReplicas: toInt32("minReplicas"), MaxReplicas: toInt32("maxReplicas")})
	return lo != hi
}
