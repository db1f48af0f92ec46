package kuberay

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The heartbeat: while a step runs, it renews a coordination.k8s.io/v1
// Lease named after its RayJob, in the RayJob's namespace and owned by it
// (the garbage collector deletes the Lease with the RayJob). Its
// holderIdentity is "host/pid" of the step and renewTime says when the
// step last proved it is alive. A step that ends but keeps its cluster
// (teardown never, or on_success after a failure) releases the Lease: it
// clears holderIdentity, so that `raystep gc` judges the RayJob by its
// deadlines and TTL, not as abandoned. leaseDurationSeconds is three
// renewal intervals: how long the step may be silent and still count as
// alive. `raystep gc` deletes a RayJob whose held Lease was not renewed for
// longer than its grace or than leaseDurationSeconds, whichever is longer.
const (
	// HeartbeatInterval is how often a step renews its Lease by default.
	HeartbeatInterval = 15 * time.Second
	// DefaultHeartbeatGrace is fleet.DefaultHeartbeatGrace.
	DefaultHeartbeatGrace = fleet.DefaultHeartbeatGrace
)

// leaseDuration is the leaseDurationSeconds a step renewing every interval
// states: three intervals, at least one second.
func leaseDuration(interval time.Duration) int32 {
	return int32(max(1, (3*interval+time.Second-1)/time.Second))
}

// heartbeat renews one step's Lease until stopped.
type heartbeat struct {
	leases   kubeapi.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	ns, name string
	owner    metav1.OwnerReference
	holder   string
	interval time.Duration
	now      func() time.Time
	notify   Notify

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	failed bool // the last renewal failed (warned once per streak)
	held   bool // the Lease was written at least once
}

// newHeartbeat prepares the heartbeat of job; it does nothing until start.
func (b *Backend) newHeartbeat(job *rayv1.RayJob) *heartbeat {
	interval := b.HeartbeatInterval
	if interval <= 0 {
		interval = HeartbeatInterval
	}
	holder := b.Holder
	if holder == "" {
		host, _ := os.Hostname()
		holder = host + "/" + strconv.Itoa(os.Getpid())
	}
	return &heartbeat{
		leases: b.Kube.CoordinationV1().Leases(job.Namespace), ns: job.Namespace, name: job.Name,
		owner:  metav1.OwnerReference{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob", Name: job.Name, UID: job.UID},
		holder: holder, interval: interval, now: b.clock().Now, notify: b.Notify,
	}
}

// lease is the Lease as this step holds it now.
func (h *heartbeat) lease() *coordinationv1.Lease {
	now := metav1.NewMicroTime(h.now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: h.name, Labels: map[string]string{LabelManagedBy: ManagedByRaystep},
			OwnerReferences: []metav1.OwnerReference{h.owner}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &h.holder, AcquireTime: &now, RenewTime: &now,
			LeaseDurationSeconds: ptr(leaseDuration(h.interval))},
	}
}

// start takes the Lease (creating it, or taking it over from a killed
// attempt) and renews it every interval until stop. A request the API
// server refuses (see refused) ends the step, since gc would delete the
// RayJob of a step that cannot keep its heartbeat: start returns it when
// taking the Lease, a refused renewal goes to fail. Any other failure is
// a warning: gc only acts after minutes without a renewal.
func (h *heartbeat) start(ctx context.Context, fail func(error)) error {
	err := h.acquire(ctx)
	if refused(err) {
		return err
	}
	h.renewed(err)
	ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := h.renew(ctx)
				if ctx.Err() != nil {
					// stop cut this renewal short: the step is ending,
					// not failing to keep its heartbeat.
					return
				}
				if refused(err) {
					fail(err)
				} else {
					h.renewed(err)
				}
			}
		}
	}()
	return nil
}

// acquire creates the Lease or takes over the one a previous attempt of
// the step holds (ownership moves to this RayJob's UID).
func (h *heartbeat) acquire(ctx context.Context) error {
	_, err := h.leases.Create(ctx, h.lease(), metav1.CreateOptions{FieldManager: FieldManager})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create heartbeat Lease %s/%s: %w", h.ns, h.name, err)
		}
		return nil
	}
	old, err := h.leases.Get(ctx, h.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get heartbeat Lease %s/%s: %w", h.ns, h.name, err)
	}
	l := h.lease()
	old.OwnerReferences, old.Labels = l.OwnerReferences, l.Labels
	prev := "nobody (released)"
	if old.Spec.HolderIdentity != nil && *old.Spec.HolderIdentity != "" {
		prev = *old.Spec.HolderIdentity
	}
	if prev != h.holder {
		old.Spec.LeaseTransitions = ptr(ptrValue(old.Spec.LeaseTransitions) + 1)
	}
	old.Spec.HolderIdentity, old.Spec.AcquireTime, old.Spec.RenewTime = l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime
	old.Spec.LeaseDurationSeconds = l.Spec.LeaseDurationSeconds
	if _, err := h.leases.Update(ctx, old, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("take over heartbeat Lease %s/%s from %s: %w", h.ns, h.name, prev, err)
	}
	h.notify.info(fmt.Sprintf("heartbeat Lease %s/%s taken over from %s", h.ns, h.name, prev))
	return nil
}

// renew sets renewTime (and the holder) to now; a Lease that is gone is
// created again.
func (h *heartbeat) renew(ctx context.Context) error {
	patch := fmt.Appendf(nil, `{"spec":{"holderIdentity":%q,"renewTime":%q}}`, h.holder, h.now().UTC().Format(metav1.RFC3339Micro))
	_, err := h.leases.Patch(ctx, h.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return h.acquire(ctx)
	}
	if err != nil {
		return fmt.Errorf("renew heartbeat Lease %s/%s: %w", h.ns, h.name, err)
	}
	return nil
}

// renewed warns about the first failure of a streak and notes the recovery.
func (h *heartbeat) renewed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil && !h.failed && h.held:
		h.notify.warn(fmt.Sprintf("%v: `raystep gc` deletes this step's RayJob once its heartbeat is %s old (by default); retrying every %s",
			err, DefaultHeartbeatGrace, h.interval))
	case err != nil && !h.failed:
		h.notify.warn(fmt.Sprintf("%v: until it is written `raystep gc` goes by this step's deadlines only; retrying every %s",
			err, h.interval))
	case err == nil && h.failed:
		h.notify.info(fmt.Sprintf("heartbeat Lease %s/%s renewed again", h.ns, h.name))
	}
	h.failed = err != nil
	h.held = h.held || err == nil
}

// stop ends the renewals and, when release, clears the holder so that gc
// treats the kept RayJob by its deadlines and TTL. The release is sent on
// a fresh short context when ctx is already done.
func (h *heartbeat) stop(ctx context.Context, release bool) error {
	if h == nil || h.cancel == nil {
		return nil
	}
	h.cancel()
	<-h.done
	if !release {
		return nil
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), deleteGrace)
		defer cancel()
	}
	patch := fmt.Appendf(nil, `{"spec":{"holderIdentity":null,"renewTime":%q}}`, h.now().UTC().Format(metav1.RFC3339Micro))
	_, err := h.leases.Patch(ctx, h.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release heartbeat Lease %s/%s: %w", h.ns, h.name, err)
	}
	return nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
