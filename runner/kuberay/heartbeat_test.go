package kuberay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// leasePatches counts the patches of heartbeat Leases and lets a test
// wait for the nth; fail, if set, answers a patch with an error.
type leasePatches struct {
	mu      sync.Mutex
	n       int
	changed chan struct{}
	fail    func(n int) error
}

func watchLeasePatches(f *fakes, fail func(n int) error) *leasePatches {
	p := &leasePatches{changed: make(chan struct{}), fail: fail}
	f.kube.PrependReactor("patch", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.n++
		close(p.changed)
		p.changed = make(chan struct{})
		if p.fail != nil {
			if err := p.fail(p.n); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	return p
}

func (p *leasePatches) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// await waits until at least n patches were made.
func (p *leasePatches) await(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		got, changed := p.n, p.changed
		p.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d Lease patches after 10s, want %d", got, n)
		}
	}
}

func (f *fakes) lease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := f.kube.CoordinationV1().Leases(testNS).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("heartbeat Lease: %v", err)
	}
	return l
}

// TestHeartbeat: Provision creates the step's Lease, owned by its RayJob
// and held by the step; the step renews it; a Teardown that keeps the
// cluster releases it, so gc judges the kept RayJob by its TTL.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.Holder, f.b.HeartbeatInterval = "host-a/42", time.Millisecond
	patches := watchLeasePatches(f, nil)
	c := f.provision(t, request(0))
	l := f.lease(t, c.name)
	wantOwner := []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: c.name, UID: c.uid}}
	if diff := cmp.Diff([]any{wantOwner, "host-a/42", ManagedByRaystep, int32(1)},
		[]any{l.OwnerReferences, ptrValue(l.Spec.HolderIdentity), l.Labels[LabelManagedBy], ptrValue(l.Spec.LeaseDurationSeconds)}); diff != "" {
		t.Errorf("Lease owner, holder, label, duration (-want +got):\n%s", diff)
	}
	first := l.Spec.RenewTime.Time
	patches.await(t, patches.count()+2)
	if renewed := f.lease(t, c.name).Spec.RenewTime.Time; !renewed.After(first) {
		t.Errorf("renewTime %s not after the first %s", renewed, first)
	}
	if err := c.Teardown(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if h := f.lease(t, c.name).Spec.HolderIdentity; h != nil {
		t.Errorf("kept cluster's Lease still held by %q, want released", *h)
	}
	job, err := f.ray.RayV1().RayJobs(testNS).Get(t.Context(), c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Released: judged as a RayJob without heartbeat (deadlines and TTL),
	// not as one whose step is gone.
	o, now := JudgeOptions{HeartbeatGrace: time.Nanosecond}, time.Now()
	if got, want := Judge(job, f.lease(t, c.name), now, o), Judge(job, nil, now, o); got.Reason != want.Reason {
		t.Errorf("gc judges the kept RayJob %q, want %q", got.Reason, want.Reason)
	}
}

// TestHeartbeatTakeover: a restarted step (another holder) takes the
// Lease over and says from whom.
func TestHeartbeatTakeover(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.Holder = "host-a/42"
	first := f.provision(t, request(0))
	first.mon.stop() // SIGKILLed: nothing more from it
	first.hb.cancel()
	f.b.Holder = "host-b/7"
	second := f.provision(t, request(0))
	l := f.lease(t, second.name)
	if diff := cmp.Diff([]any{"host-b/7", int32(1)}, []any{ptrValue(l.Spec.HolderIdentity), ptrValue(l.Spec.LeaseTransitions)}); diff != "" {
		t.Errorf("holder, transitions (-want +got):\n%s", diff)
	}
	if !f.noted("taken over from host-a/42") {
		t.Errorf("no takeover note in %q", f.allNotes())
	}
	if err := second.Teardown(t.Context(), true); err != nil {
		t.Fatal(err)
	}
}

// TestHeartbeatFailureIsAWarning: renewals that fail warn once, the step
// carries on, and the recovery is noted.
func TestHeartbeatFailureIsAWarning(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.HeartbeatInterval = time.Millisecond
	watchLeasePatches(f, func(n int) error {
		if n <= 3 {
			return apierrors.NewServiceUnavailable("etcd is busy")
		}
		return nil
	})
	c := f.provision(t, request(0))
	f.awaitNote(t, "WARNING renew heartbeat Lease "+c.Name()+": etcd is busy: `raystep gc` deletes this step's RayJob once its heartbeat is 5m0s old")
	f.awaitNote(t, "INFO heartbeat Lease "+c.Name()+" renewed again")
	warnings := 0
	for _, n := range f.allNotes() {
		if strings.HasPrefix(n, "WARNING") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings for one streak of failures, want 1: %q", warnings, f.allNotes())
	}
	select {
	case err := <-c.Failures():
		t.Errorf("the step failed: %v", err)
	default:
	}
	if err := c.Teardown(t.Context(), false); err != nil {
		t.Fatal(err)
	}
}

// TestHeartbeatStoppedMidRenewalIsQuiet: a renewal that teardown cuts
// short (its request ends with "context canceled") is the step ending, not
// a heartbeat failing: no warning at the end of a step that succeeded.
func TestHeartbeatStoppedMidRenewalIsQuiet(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.HeartbeatInterval = time.Millisecond
	entered, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.kube.PrependReactor("patch", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return false, nil, nil
		}
		close(entered)
		<-unblock
		return true, nil, fmt.Errorf("Patch lease: %w", context.Canceled)
	})
	c := f.provision(t, request(0))
	<-entered
	c.hb.cancel() // what stop does first, while the renewal is in flight
	close(unblock)
	if err := c.Teardown(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	for _, n := range f.allNotes() {
		if strings.HasPrefix(n, "WARNING") {
			t.Errorf("warning at the end of a step: %q", n)
		}
	}
}

// TestHeartbeatLeaseGoneIsRecreated: a Lease deleted under a running step
// is created again at the next renewal.
func TestHeartbeatLeaseGoneIsRecreated(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.HeartbeatInterval = time.Millisecond
	var mu sync.Mutex
	deleted := false
	creates := make(chan struct{}, 10)
	f.kube.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if deleted {
			creates <- struct{}{}
		}
		return false, nil, nil
	})
	c := f.provision(t, request(0))
	mu.Lock()
	if err := f.kube.CoordinationV1().Leases(testNS).Delete(t.Context(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted = true
	mu.Unlock()
	select {
	case <-creates:
	case <-time.After(10 * time.Second):
		t.Fatal("the deleted Lease was not created again after 10s")
	}
	if err := c.Teardown(t.Context(), true); err != nil {
		t.Fatal(err)
	}
}

// TestHeartbeatForbidden: a step whose Lease create is refused fails
// Provision with the API server's Forbidden (and hands back its cluster for
// teardown); one whose renewal is refused reports it on Failures.
func TestHeartbeatForbidden(t *testing.T) {
	t.Parallel()
	forbidden := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "", errors.New("RBAC: access denied"))
	}
	t.Run("create", func(t *testing.T) {
		t.Parallel()
		f := newFakes(t)
		f.kube.PrependReactor("create", "leases", forbidden)
		cl, err := f.b.Provision(t.Context(), request(0), f.sink())
		if want := "create heartbeat Lease " + testNS + "/"; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Provision = %v, want Forbidden saying %q", err, want)
		}
		if cl == nil {
			t.Fatal("Provision returned no cluster to tear down")
		}
		c := cl.(*Cluster)
		t.Cleanup(func() { c.stopWatching(t) })
		f.awaitRayJobWatch(t, c)
		if err := cl.Teardown(t.Context(), false); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("renew", func(t *testing.T) {
		t.Parallel()
		f := newFakes(t)
		f.b.HeartbeatInterval = time.Millisecond
		f.kube.PrependReactor("patch", "leases", forbidden)
		c := f.provision(t, request(0))
		select {
		case err := <-c.Failures():
			if want := "renew heartbeat Lease " + c.Name(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("failure = %v, want Forbidden saying %q", err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no failure 10s after the renewals were refused")
		}
		if err := c.Teardown(t.Context(), false); err != nil {
			t.Fatal(err)
		}
	})
}
