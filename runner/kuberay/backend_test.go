package kuberay

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayfake "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
)

const testNS = "ml-ads"

// fakes is a backend on fake clientsets, with what it notified.
type fakes struct {
	kube *kubefake.Clientset
	ray  *rayfake.Clientset
	b    *Backend
	// events receives the step's events; newFakes discards them.
	events runner.Sink

	mu       sync.Mutex
	notes    []string
	watching map[string]bool // resources with a watch open
	changed  chan struct{}   // closed and replaced when notes or watching change
}

func newFakes(t *testing.T, objs ...runtime.Object) *fakes {
	t.Helper()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	// KubeRay's generated NewClientset has no type converter for its own
	// kinds (creates fail with "no type found"); the simple one works.
	f := &fakes{kube: kubefake.NewClientset(), ray: rayfake.NewSimpleClientset(objs...)}
	f.b = &Backend{Kube: kubeapitest.Kube(f.kube), Ray: kubeapitest.Ray(f.ray), Spec: spec, Profile: profile,
		Dashboard: DashboardOptions{URL: "http://127.0.0.1:8265"},
		Notify: func(level, msg string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.notes = append(f.notes, level+" "+msg)
			f.broadcast()
		}}
	f.watching = map[string]bool{}
	f.changed = make(chan struct{})
	// The API server gives every object a UID; the fake tracker does not.
	f.ray.PrependReactor("create", "rayjobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if job, ok := a.(k8stesting.CreateAction).GetObject().(*rayv1.RayJob); ok && job.UID == "" {
			job.UID = types.UID(job.Name + "-uid")
		}
		return false, nil, nil
	})
	f.kube.PrependWatchReactor("*", f.recordWatch(f.kube.Tracker()))
	f.ray.PrependWatchReactor("*", f.recordWatch(f.ray.Tracker()))
	return f
}

// recordWatch opens watches on the tracker itself and records them: the
// fake tracker does not replay from a resourceVersion, so a test changes
// objects only once the informers' watches are open.
func (f *fakes) recordWatch(tracker k8stesting.ObjectTracker) k8stesting.WatchReactionFunc {
	return func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace())
		f.mu.Lock()
		f.watching[a.GetResource().Resource] = err == nil
		f.broadcast()
		f.mu.Unlock()
		return true, w, err
	}
}

// broadcast wakes awaitFakes; f.mu is held.
func (f *fakes) broadcast() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// awaitFakes waits until cond, called with f.mu held, holds after a
// change of the notes or the open watches; it fails the test after a
// bound that only catches a hang.
func (f *fakes) awaitFakes(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		ok, changed := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("no %s after 10s; notes: %q", what, f.allNotes())
		}
	}
}

// awaitWatch waits until a watch on resource is open.
func (f *fakes) awaitWatch(t *testing.T, resource string) {
	t.Helper()
	f.awaitFakes(t, "watch on "+resource, func() bool { return f.watching[resource] })
}

// awaitNote waits until a note containing s was notified.
func (f *fakes) awaitNote(t *testing.T, s string) {
	t.Helper()
	f.awaitFakes(t, "note "+strconv.Quote(s), func() bool { return f.notedLocked(s) })
}

func (f *fakes) allNotes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.notes)
}

// request is a resolved step attempt of the train example in testNS.
func request(retry int) runner.Step {
	return runner.Resolve(runner.Step{Name: "ads-ranking-train", Namespace: testNS, Dagster: runner.Dagster{
		RunID: "3f2a9c1b-7d0e-4c55-9a51-0e2f6b8f4c11", StepKey: "ads_ranking_model", RetryNumber: retry,
		AssetKeys: []string{"ads/ranking_model"}}}, nil)
}

// provision provisions and waits until the RayJob watch has listed, so
// changes the test makes next are seen.
func (f *fakes) provision(t *testing.T, req runner.Step) *Cluster {
	t.Helper()
	cl, err := f.b.Provision(t.Context(), req, f.sink())
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	c := cl.(*Cluster)
	t.Cleanup(func() { c.stopWatching(t) })
	f.awaitRayJobWatch(t, c)
	return c
}

// awaitRayJobWatch waits until the cluster's RayJob watch has listed the
// RayJob and is open: a change the fake tracker sees before that, such as
// Teardown's delete, no watch would ever show.
func (f *fakes) awaitRayJobWatch(t *testing.T, c *Cluster) {
	t.Helper()
	await(t, c, "RayJob watch synced", func(v view) bool { return v.jobSync && v.job != nil })
	f.awaitWatch(t, "rayjobs")
}

// stopWatching stops what a test's cluster runs in the background when
// the test did not tear it down: its watches and its heartbeat, which
// would otherwise renew its Lease for the rest of the package's run.
func (c *Cluster) stopWatching(t *testing.T) {
	c.mon.stop()
	if err := c.hb.stop(context.WithoutCancel(t.Context()), false); err != nil {
		t.Errorf("stop the heartbeat: %v", err)
	}
}

// await waits until cond holds for the cluster's view.
func await(t *testing.T, c *Cluster, what string, cond func(v view) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := c.mon.await(ctx, func(v view) (bool, error, time.Duration) { return cond(v), nil, 0 })
	if err != nil {
		t.Fatalf("wait for %s: %v", what, err)
	}
}

// setStatus updates the RayJob's status as the operator would.
func (f *fakes) setStatus(t *testing.T, name string, st rayv1.RayJobStatus) {
	t.Helper()
	job, err := f.ray.RayV1().RayJobs(testNS).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Status = st
	if _, err := f.ray.RayV1().RayJobs(testNS).UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// initializing moves the RayJob to Initializing with a RayCluster name and
// waits until its pods are watched.
func (f *fakes) initializing(t *testing.T, c *Cluster) {
	t.Helper()
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing, RayClusterName: c.name + "-abcde"})
	await(t, c, "pod watch synced", func(v view) bool { return v.podsSync })
	f.awaitWatch(t, "pods")
}

// ready provisions a step's cluster and takes it through Initializing and
// Waiting to Ready, as KubeRay does for a RayJob whose pods run.
func (f *fakes) ready(t *testing.T) *Cluster {
	t.Helper()
	c := f.provision(t, request(0))
	f.initializing(t, c)
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
	if err := c.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fakes) addPod(t *testing.T, c *Cluster, name, nodeType string, st corev1.PodStatus) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS,
		Labels: map[string]string{labelCluster: c.name + "-abcde", labelNodeType: nodeType}}, Status: st}
	if _, err := f.kube.CoreV1().Pods(testNS).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestProvisionCreatesTheRenderedRayJob(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	req := request(1)
	c := f.provision(t, req)
	got, err := f.ray.RayV1().RayJobs(testNS).Get(t.Context(), req.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Build(f.b.Spec, f.b.Profile, req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("RayJob spec differs from render (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if c.Name() != testNS+"/"+req.ID {
		t.Errorf("Name() = %q", c.Name())
	}
}

func TestProvisionReattachesToItsOwnRayJob(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	req := request(0)
	first := f.provision(t, req)
	f.setStatus(t, req.ID, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, RayClusterName: req.ID + "-abcde"})
	second := f.provision(t, req)
	if err := second.Ready(t.Context()); err != nil {
		t.Fatalf("Ready on a re-attached running RayJob: %v", err)
	}
	list, err := f.ray.RayV1().RayJobs(testNS).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("RayJobs: %d, %v; want exactly one", len(list.Items), err)
	}
	if first.uid != second.uid {
		t.Errorf("re-attached to uid %q, created %q", second.uid, first.uid)
	}
	if !f.noted("re-attaching") {
		t.Errorf("no re-attach note in %q", f.notes)
	}
}

func TestProvisionRefusesSomeoneElsesRayJob(t *testing.T) {
	t.Parallel()
	req := request(0)
	other := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: req.ID, Namespace: testNS,
		Labels: map[string]string{LabelManagedBy: "someone-else"}}}
	f := newFakes(t, other)
	cl, err := f.b.Provision(t.Context(), req, f.sink())
	if cl != nil || err == nil || !strings.Contains(err.Error(), "was not created for this step") {
		t.Fatalf("Provision = %v, %v; want nil and a refusal", cl, err)
	}
}

func TestProvisionRejectedCreatesNothing(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.ray.PrependReactor("create", "rayjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(rayv1.Resource("rayjobs"), "", errors.New(`User "bob" cannot create resource "rayjobs"`))
	})
	cl, err := f.b.Provision(t.Context(), request(0), f.sink())
	if cl != nil || !apierrors.IsForbidden(err) {
		t.Fatalf("Provision = %v, %v; want nil and Forbidden", cl, err)
	}
}

// TestReadyWaitsForWaiting: Ready does not return while the RayJob is
// Initializing (checked on the state itself: a cancelled Ready returns
// after one look), and returns once KubeRay says Waiting.
func TestReadyWaitsForWaiting(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	done := make(chan error, 1)
	go func() { done <- c.Ready(t.Context()) }()
	f.initializing(t, c)
	f.addPod(t, c, "head", "head", corev1.PodStatus{Phase: corev1.PodPending})
	await(t, c, "pending head pod seen", func(v view) bool { return len(v.pods) == 1 })
	if err := c.Ready(cancelled(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready while Initializing = %v, want still waiting", err)
	}
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
	if err := <-done; err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// cancelled is a context that is already done: a wait on the monitor
// given it looks at the current state once and returns.
func cancelled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

func (f *fakes) noted(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notedLocked(s)
}

// notedLocked is noted with f.mu held.
func (f *fakes) notedLocked(s string) bool {
	for _, n := range f.notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// TestNoticesAreStepEvents: what the backend tells people goes to the
// step's events (the runner stamps the phase), notes as KindNote.
func TestNoticesAreStepEvents(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	var mu sync.Mutex
	var got []runner.Event
	req := request(0)
	f.events = runner.SinkFunc(func(e runner.Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	})
	f.provision(t, req)
	f.provision(t, req)
	mu.Lock()
	defer mu.Unlock()
	var reattach []runner.Event
	for _, e := range got {
		if strings.Contains(e.Message, "re-attaching") {
			reattach = append(reattach, e)
		}
	}
	if len(reattach) != 1 || reattach[0].Kind != runner.KindNote || reattach[0].Phase != "" ||
		!strings.HasPrefix(reattach[0].Message, "RayJob "+testNS+"/"+req.ID+" exists (created ") {
		t.Errorf("events %+v, want one re-attach note left for the runner to stamp", got)
	}
}

func TestNotifyEventsKinds(t *testing.T) {
	t.Parallel()
	var got []runner.Event
	var also []string
	n := notifyEvents(runner.SinkFunc(func(e runner.Event) { got = append(got, e) }), func(level, msg string) { also = append(also, level+" "+msg) })
	n.warn("pod head-0: FailedScheduling")
	n.info("heartbeat renewed")
	want := []runner.Event{{Kind: runner.KindWarning, Message: "pod head-0: FailedScheduling"}, {Kind: runner.KindNote, Message: "heartbeat renewed"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"WARNING pod head-0: FailedScheduling", "INFO heartbeat renewed"}, also); diff != "" {
		t.Errorf("Notify (-want +got):\n%s", diff)
	}
}

// sink is where the fakes' steps tell their events: f.events, or nowhere.
func (f *fakes) sink() runner.Sink {
	if f.events != nil {
		return f.events
	}
	return runner.Discard
}
