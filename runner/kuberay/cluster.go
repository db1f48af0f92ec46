package kuberay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/raystep/raystep/runner"
)

// deleteGrace bounds issuing the delete when the teardown context is
// already cancelled (the user insisted with a second signal).
const deleteGrace = 10 * time.Second

// Cluster is one step's RayJob, as runner.Cluster.
type Cluster struct {
	b        *Backend
	ns, name string
	uid      types.UID // of the RayJob this step created or attached to; "" if unknown
	mon      *monitor
	hb       *heartbeat // nil when the RayJob's UID is unknown
	failures chan error
	token    string // for the dashboard; see authorize
	// secret is the token Secret as authorize made or found it, token
	// included (for restoreSecret), when raystep made the token; nil
	// without token authentication.
	secret *corev1.Secret

	mu  sync.Mutex
	fwd *forward // the dashboard port-forward, if any
}

var _ runner.Cluster = (*Cluster)(nil)

func (b *Backend) newCluster(job *rayv1.RayJob) *Cluster {
	c := &Cluster{
		b: b, ns: job.Namespace, name: job.Name, uid: job.UID,
		mon:      newMonitor(b.Kube, b.Ray, job.Namespace, job.Name, b.clock(), b.UnschedulableGrace, b.Notify),
		failures: make(chan error, 1), token: b.Dashboard.Token,
	}
	c.mon.onStart = c.reportFailures
	// Kueue's Workloads are read with a dynamic client: raystep does not
	// link Kueue's API.
	c.mon.dyn = b.Dynamic
	if c.mon.dyn == nil && b.Config != nil {
		if dyn, err := dynamic.NewForConfig(b.Config); err == nil {
			c.mon.dyn = dyn
		}
	}
	return c
}

// Name returns "namespace/name" of the RayJob.
func (c *Cluster) Name() string { return c.ns + "/" + c.name }

// Ready waits, by watch, until KubeRay waits for a job (deployment status
// Waiting; Running or Complete for a restarted step). It fails fast with a
// *ClusterError on ValidationFailed, Failed (deadlines), a deleted RayJob
// and pods that are Unschedulable, cannot pull their image, crash-loop or
// failed, with Kubernetes' own message.
func (c *Cluster) Ready(ctx context.Context) error {
	err := c.mon.await(ctx, func(v view) (bool, error, time.Duration) {
		err, again := c.mon.problem(v)
		if err != nil || v.job == nil {
			return false, err, again
		}
		r, _ := jobState(v.job)
		return r == ready, nil, again // look again when an Unschedulable pod's grace ends
	})
	if err != nil {
		return err
	}
	c.mon.markReady()
	return nil
}

// Admitted waits, by watch, until no queue holds the RayJob (see
// runner.Queued): at once for a RayJob that is not queued, once Kueue
// admitted it (spec.suspend cleared and KubeRay no longer suspended)
// otherwise. It fails fast as Ready does.
func (c *Cluster) Admitted(ctx context.Context) error {
	return c.mon.await(ctx, func(v view) (bool, error, time.Duration) {
		if err, _ := c.mon.problem(v); err != nil || v.job == nil {
			return false, err, 0
		}
		return !suspended(v.job), nil, 0
	})
}

// reportFailures sends the first infrastructure failure the watches show,
// from Provision until Teardown.
func (c *Cluster) reportFailures(ctx context.Context) {
	err := c.mon.await(ctx, func(v view) (bool, error, time.Duration) {
		err, again := c.mon.problem(v)
		return false, err, again
	})
	if err != nil && ctx.Err() == nil {
		c.report(err)
	}
}

// Failures reports the first infrastructure failure while the step runs.
func (c *Cluster) Failures() <-chan error { return c.failures }

// Disruption returns the first pod of the cluster lost to a disruption
// since it was ready, or nil (see runner.Disrupted).
func (c *Cluster) Disruption() error {
	c.mon.mu.Lock()
	defer c.mon.mu.Unlock()
	if d := c.mon.disruption; d != nil {
		return d
	}
	return nil
}

// SetJobID sets the RayJob's spec.jobId to the submission id, so KubeRay
// follows the job (Waiting becomes Running). It is a no-op when already set.
func (c *Cluster) SetJobID(ctx context.Context, id string) error {
	if job := c.mon.latestJob(); job != nil && job.Spec.JobId == id {
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"jobId":%q}}`, id)
	_, err := c.b.Ray.RayV1().RayJobs(c.ns).Patch(ctx, c.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("set spec.jobId of RayJob %s: %w", c.Name(), err)
	}
	return nil
}

// Teardown stops the dashboard port-forward and the heartbeat and, unless
// keep, deletes the RayJob (in the foreground, see deleteRayJobOptions:
// the garbage collector removes its RayCluster, pods, token Secret,
// heartbeat Lease and Kueue Workload) and waits by watch until the RayJob,
// its RayCluster, its pods and its Workload are gone, within ctx. The
// delete is issued even when ctx is already cancelled. A kept RayJob stays
// for debugging: KubeRay deletes its RayCluster ttlSecondsAfterFinished
// after the job ends (or after a deadline fails it), and `raystep gc`
// removes the RayJob; its heartbeat Lease is released so gc goes by those
// rules.
func (c *Cluster) Teardown(ctx context.Context, keep bool) error {
	c.mon.markLeaving()
	c.closeForward()
	defer c.mon.stop()
	hbErr := c.hb.stop(ctx, keep)
	if keep {
		c.b.Notify.info(fmt.Sprintf("RayJob %s kept: KubeRay deletes its RayCluster after ttlSecondsAfterFinished; `raystep gc` deletes the RayJob", c.Name()))
		return hbErr
	}
	c.restoreSecret(ctx, "was deleted while the step ran")
	if err := c.delete(ctx); err != nil {
		return err
	}
	return c.awaitGone(ctx)
}

// delete deletes the RayJob (deleteRayJobOptions), on a fresh short
// context when ctx is already done. A RayJob already gone is fine.
func (c *Cluster) delete(ctx context.Context) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), deleteGrace)
		defer cancel()
	}
	err := c.b.Ray.RayV1().RayJobs(c.ns).Delete(ctx, c.name, deleteRayJobOptions(c.uid))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("delete RayJob %s: it was replaced by another object of the same name: %w", c.Name(), err)
	}
	return fmt.Errorf("delete RayJob %s: %w", c.Name(), err)
}

// deleteRayJobOptions deletes the RayJob of UID uid (any, when empty) in
// the foreground: the garbage collector deletes what it owns first (its
// RayCluster, whose pods go before it, its token Secret, heartbeat Lease
// and Kueue Workload) and the RayJob last, so the RayJob gone means the
// step's pods are gone. (In the background the RayJob goes first and a
// RayCluster reconcile still under way can make pods after the RayCluster
// is gone, which the collector deletes only later.)
//
// KubeRay holds a deleted RayJob by its finalizer until it has asked the
// dashboard to stop the Ray job, and when the job has not ended it builds
// that client from the token Secret: without the Secret it fails and
// waits for the RayCluster to be gone. awaitGone handles the one case
// where that never happens (heldForSecret).
func deleteRayJobOptions(uid types.UID) metav1.DeleteOptions {
	fg := metav1.DeletePropagationForeground
	opts := metav1.DeleteOptions{PropagationPolicy: &fg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return opts
}

// heldForSecret reports whether v shows the RayJob stuck after a
// foreground delete: the garbage collector has deleted its token Secret
// and dropped its foregroundDeletion finalizer while pods of its
// RayCluster remain (a collector that had not yet seen the RayCluster
// does that, on a busy API server), so it will not delete them while the
// RayJob exists, and KubeRay, without the Secret, will not let the RayJob
// go. Making the Secret again breaks the knot.
func heldForSecret(v view) bool {
	j := v.job
	return j != nil && j.DeletionTimestamp != nil && len(v.pods) > 0 && heldByKubeRay(j)
}

// kuberayJobFinalizer is the finalizer KubeRay puts on a RayJob to stop
// its Ray job before the RayJob goes.
const kuberayJobFinalizer = "ray.io/rayjob-finalizer"

// awaitGone waits until the watches see the RayJob, its pods and its Kueue
// Workload gone, then makes sure its RayCluster is gone too. A borrowed
// cluster (Backend.Cluster) and its pods stay: only the RayJob goes.
func (c *Cluster) awaitGone(ctx context.Context) error {
	borrowed := c.b.Cluster != ""
	var last view
	restored := false
	err := c.mon.await(ctx, func(v view) (bool, error, time.Duration) {
		last = v
		if v.blind { // the delete was issued, but nothing shows it done
			return false, v.denied, 0
		}
		if !restored && heldForSecret(v) {
			restored = true
			c.restoreSecret(ctx, "is gone while KubeRay holds the deleted RayJob "+c.Name()+" and pods of its RayCluster remain")
		}
		return v.gone() && (borrowed || len(v.pods) == 0) && len(v.workloads) == 0, nil, 0
	})
	if err != nil {
		return fmt.Errorf("wait for RayJob %s to be deleted: %w (%s)", c.Name(), err, last.leftovers())
	}
	if rc := c.mon.clusterName(); rc != "" && !borrowed {
		if err := c.awaitClusterGone(ctx, rc); err != nil {
			return err
		}
	}
	return nil
}

// awaitClusterGone checks that the RayCluster is gone and otherwise waits
// for its deletion by watch.
func (c *Cluster) awaitClusterGone(ctx context.Context, name string) error {
	err := watchGone(ctx, c.b.Ray.RayV1().RayClusters(c.ns), c.b.Ray, name, &rayv1.RayCluster{})
	if err != nil {
		return fmt.Errorf("wait for RayCluster %s/%s to be deleted: %w", c.ns, name, err)
	}
	return nil
}

// gone reports whether the RayJob is known to be deleted.
func (v view) gone() bool { return v.jobGone || v.jobSync && v.job == nil && v.rc == nil }

// leftovers describes what still exists, for a teardown that timed out.
func (v view) leftovers() string {
	var parts []string
	if !v.gone() && v.job != nil {
		s := "RayJob still exists"
		if len(v.job.Finalizers) > 0 {
			s += fmt.Sprintf(" with finalizers %v", v.job.Finalizers)
		}
		parts = append(parts, s)
	}
	if !v.gone() && v.rc != nil {
		parts = append(parts, fmt.Sprintf("RayCluster still exists with finalizers %v", v.rc.Finalizers))
	}
	if n := len(v.pods); n > 0 {
		parts = append(parts, fmt.Sprintf("%d pods left, e.g. %s (%s)", n, v.pods[0].Name, v.pods[0].Status.Phase))
	}
	if len(v.workloads) > 0 {
		parts = append(parts, "Kueue Workload "+strings.Join(v.workloads, ", ")+" left")
	}
	if len(parts) == 0 {
		return "state unknown"
	}
	return strings.Join(parts, "; ")
}

// RecordOutcome notes the Ray job's final status on the RayJob
// (AnnotationJobStatus), so `raystep ui` shows how it ended while it is
// deleted.
func (c *Cluster) RecordOutcome(ctx context.Context, status runner.JobStatus) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationJobStatus, status)
	if _, err := c.b.Ray.RayV1().RayJobs(c.ns).Patch(ctx, c.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("annotate RayJob %s: %w", c.Name(), err)
	}
	return nil
}
