package kuberay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// KubeRay's pod labels.
const (
	labelCluster  = "ray.io/cluster"
	labelNodeType = "ray.io/node-type"
)

// monitor follows one RayJob, its pods and the warning events about them
// by watch (list once, then watch; re-list when a watch expires) from
// Provision until Teardown, and keeps the latest state for Ready,
// Failures and Teardown to wait on. It never polls.
//
// mu is the monitor's own: only its methods take it, and none calls out
// (notify, a waiter's check) while holding it. What it learns under the
// lock that people should know is collected and told after unlocking.
type monitor struct {
	// kind is what the monitor follows: "" for a step's RayJob,
	// kindRayCluster for an interactive RayCluster (interactive_watch.go),
	// whose pods it watches from the start.
	kind   string
	kube   kubeapi.Interface
	ray    kubeapi.RayInterface
	dyn    dynamic.Interface // reads Kueue's Workloads; nil for none
	ns     string
	name   string
	clock  runner.Clock
	grace  time.Duration // how long a pod may be Unschedulable
	notify Notify
	// onStart, if set, runs in its own goroutine from start until stop.
	onStart func(ctx context.Context)

	ctx    context.Context // ends at teardown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	job      *rayv1.RayJob     // latest seen; nil before the first event
	rc       *rayv1.RayCluster // the interactive RayCluster, likewise
	jobGone  bool              // the RayJob (or interactive RayCluster) was seen deleted
	pods     map[string]*corev1.Pod
	podsFor  string // the RayCluster whose pods are watched
	podsSync bool   // the pod watch has listed once
	jobSync  bool   // the RayJob (or RayCluster) watch has listed once
	changed  chan struct{}
	warned   map[string]bool
	isReady  bool // Ready succeeded: problems on workers are warnings now
	// disruption is the first pod of the cluster seen with a
	// DisruptionTarget condition once it was ready and before teardown.
	disruption     *ClusterError
	disruptedEarly map[string]bool // pods disrupted before the cluster was ready
	denied         error           // a list or watch was refused
	blind          bool            // the refused one is of RayJobs or pods: teardown cannot see them go
	fatal          error           // a KubeRay warning that provisioning cannot succeed
	started        time.Time
	leaving        bool // Teardown started: a deleted RayJob is expected
	q              queueState
	// podsStop ends the pod watch, to follow the next RayCluster when a
	// queue suspended the RayJob before it was ready.
	podsStop context.CancelFunc
}

func newMonitor(kube kubeapi.Interface, ray kubeapi.RayInterface, ns, name string, clock runner.Clock, grace time.Duration, notify Notify) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	return &monitor{
		kube: kube, ray: ray, ns: ns, name: name, clock: clock, grace: grace, notify: notify,
		ctx: ctx, cancel: cancel, started: clock.Now(),
		pods: map[string]*corev1.Pod{}, changed: make(chan struct{}), warned: map[string]bool{},
	}
}

// start begins watching the RayJob and the warning events of the namespace.
func (m *monitor) start() {
	byName := fields.OneTermEqualSelector("metadata.name", m.name).String()
	if m.kind == kindRayCluster {
		m.watchRayCluster(byName)
	} else {
		jobs := m.ray.RayV1().RayJobs(m.ns)
		m.run(selected(jobs, func(o *metav1.ListOptions) { o.FieldSelector = byName }),
			m.ray, &rayv1.RayJob{}, m.onJob, func() { m.set(func() { m.jobSync = true }) })
	}
	events := m.kube.CoreV1().Events(m.ns)
	warnings := fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String()
	m.run(selected(events, func(o *metav1.ListOptions) { o.FieldSelector = warnings }),
		m.kube, &corev1.Event{}, m.onEvent, nil)
	if m.onStart != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.onStart(m.ctx)
		}()
	}
}

// watchPods starts watching the pods of RayCluster rc, until the monitor
// stops or the watch of another RayCluster replaces it.
func (m *monitor) watchPods(rc string) {
	ctx, stop := context.WithCancel(m.ctx)
	m.set(func() { m.podsStop = stop })
	pods := m.kube.CoreV1().Pods(m.ns)
	sel := labels.SelectorFromSet(labels.Set{labelCluster: rc}).String()
	m.runIn(ctx, selected(pods, func(o *metav1.ListOptions) { o.LabelSelector = sel }),
		m.kube, &corev1.Pod{}, m.onPod, func() { m.set(func() { m.podsSync = m.podsSync || m.podsFor == rc }) })
}

// run runs an informer until the monitor stops. onSync, if set, is called
// once the informer has listed.
func (m *monitor) run(lw *cache.ListWatch, client any, obj runtime.Object, on func(obj any, deleted bool), onSync func()) {
	m.runIn(m.ctx, lw, client, obj, on, onSync)
}

// runIn runs an informer until ctx ends, as run does. A list or watch the
// API server refuses fails the step (see refused): without the RayJob
// nothing is followed, without the pods Unschedulable and crash-looping
// pods go unseen and teardown cannot tell when they are gone, without the
// events KubeRay's fatal warnings do. Kueue's Workloads are the exception:
// without them a queued step only misses Kueue's reason, so a refusal
// there is one warning.
func (m *monitor) runIn(ctx context.Context, lw *cache.ListWatch, client any, obj runtime.Object, on func(obj any, deleted bool), onSync func()) {
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, cache.SharedIndexInformerOptions{})
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		m.watchFailed(obj, err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { on(o, false) },
		UpdateFunc: func(_, o any) { on(o, false) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			on(o, true)
		},
	})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		inf.RunWithContext(ctx)
	}()
	if onSync != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			// The handler's registration, not the informer: the informer
			// has synced once its store holds the first list, which may be
			// before on has seen it, and onSync then would say that what is
			// there is gone.
			if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
				onSync()
			}
		}()
	}
}

// watchFailed records the first list or watch of obj's kind the API
// server refuses.
func (m *monitor) watchFailed(obj runtime.Object, err error) {
	if !refused(err) {
		return
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m.warnOnce(fmt.Sprintf("cannot watch %s in %s (%v): raystep will not see them", u.GetKind(), m.ns, err), "denied/"+u.GetKind())
		return
	}
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
	m.set(func() {
		switch {
		case m.denied != nil:
		case kind == m.subject():
			m.denied = fmt.Errorf("watch %s %s/%s: %w", kind, m.ns, m.name, err)
		default:
			m.denied = fmt.Errorf("watch %ss of %s %s/%s: %w", kind, m.subject(), m.ns, m.name, err)
		}
		_, isEvent := obj.(*corev1.Event)
		m.blind = m.blind || !isEvent
	})
}

// stop ends every watch and waits for them.
func (m *monitor) stop() {
	m.cancel()
	m.wg.Wait()
}

// lifetime is a context that ends when the monitor stops (at teardown).
func (m *monitor) lifetime() context.Context { return m.ctx }

// clusterName returns the RayCluster's name once KubeRay chose it.
func (m *monitor) clusterName() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.podsFor
}

// latestJob returns the RayJob as last seen, or nil before the first event.
func (m *monitor) latestJob() *rayv1.RayJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.job
}

// runningHead returns the name of the running head pod, if there is one.
func (m *monitor) runningHead() (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pods {
		if isRunningHead(p) {
			return p.Name, true
		}
	}
	return "", false
}

// isRunningHead reports whether pod is a head pod that runs and is not
// being deleted: one a port-forward can go to.
func isRunningHead(p *corev1.Pod) bool {
	return isHead(p) && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
}

// markReady records that Ready succeeded: from now on a broken worker is
// a warning, not a failure.
func (m *monitor) markReady() { m.set(func() { m.isReady = true }) }

// markLeaving records that Teardown started: a deleted RayJob is expected.
func (m *monitor) markLeaving() { m.set(func() { m.leaving = true }) }

// set changes a flag under the lock and wakes the waiters.
func (m *monitor) set(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
	m.broadcast()
}

// broadcast wakes every waiter; m.mu is held.
func (m *monitor) broadcast() {
	close(m.changed)
	m.changed = make(chan struct{})
}
