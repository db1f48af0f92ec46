package kuberay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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
type monitor struct {
	kube   kubernetes.Interface
	ray    rayclient.Interface
	ns     string
	name   string
	now    func() time.Time
	grace  time.Duration // how long a pod may be Unschedulable
	notify Notify
	// onStart, if set, runs in its own goroutine from start until stop.
	onStart func(ctx context.Context)

	ctx    context.Context // ends at teardown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	job      *rayv1.RayJob // latest seen; nil before the first event
	jobGone  bool          // the RayJob was seen deleted
	pods     map[string]*corev1.Pod
	podsFor  string // the RayCluster whose pods are watched
	podsSync bool   // the pod watch has listed once
	jobSync  bool   // the RayJob watch has listed once
	changed  chan struct{}
	warned   map[string]bool
	isReady  bool  // Ready succeeded: problems on workers are warnings now
	denied   error // the RayJob watch was refused
	fatal    error // a KubeRay warning that provisioning cannot succeed
	started  time.Time
	leaving  bool // Teardown started: a deleted RayJob is expected
}

func newMonitor(kube kubernetes.Interface, ray rayclient.Interface, ns, name string, now func() time.Time, grace time.Duration, notify Notify) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	return &monitor{
		kube: kube, ray: ray, ns: ns, name: name, now: now, grace: grace, notify: notify,
		ctx: ctx, cancel: cancel, started: now(),
		pods: map[string]*corev1.Pod{}, changed: make(chan struct{}), warned: map[string]bool{},
	}
}

// start begins watching the RayJob and the warning events of the namespace.
func (m *monitor) start() {
	jobs := m.ray.RayV1().RayJobs(m.ns)
	byName := fields.OneTermEqualSelector("metadata.name", m.name).String()
	m.run(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return jobs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return jobs.Watch(ctx, o)
		},
	}, m.ray, &rayv1.RayJob{}, m.onJob, func() { m.set(func() { m.jobSync = true }) })
	events := m.kube.CoreV1().Events(m.ns)
	warnings := fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String()
	m.run(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = warnings
			return events.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = warnings
			return events.Watch(ctx, o)
		},
	}, m.kube, &corev1.Event{}, m.onEvent, nil)
	if m.onStart != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.onStart(m.ctx)
		}()
	}
}

// clusterName returns the RayCluster's name once KubeRay chose it.
func (m *monitor) clusterName() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.podsFor
}

// run runs an informer until the monitor stops. onSync, if set, is called
// once the informer has listed. A watch the API server forbids is fatal
// for the RayJob (nothing could be followed) and a warning for the rest
// (failing fast or surfacing events is off).
func (m *monitor) run(lw *cache.ListWatch, client any, obj runtime.Object, on func(obj any, deleted bool), onSync func()) {
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, cache.SharedIndexInformerOptions{})
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		m.watchFailed(obj, err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
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
		inf.RunWithContext(m.ctx)
	}()
	if onSync != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if cache.WaitForCacheSync(m.ctx.Done(), inf.HasSynced) {
				onSync()
			}
		}()
	}
}

// watchFailed records a watch of obj's kind the API server refuses.
func (m *monitor) watchFailed(obj runtime.Object, err error) {
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		return
	}
	if _, ok := obj.(*rayv1.RayJob); ok {
		m.set(func() {
			if m.denied == nil {
				m.denied = fmt.Errorf("watch RayJob %s/%s: %w", m.ns, m.name, err)
			}
		})
		return
	}
	kind := fmt.Sprintf("%T", obj)
	m.warnOnce(fmt.Sprintf("cannot watch %s in %s (%v): raystep will not see them", strings.TrimPrefix(kind, "*v1."), m.ns, err), "denied/"+kind)
}

// stop ends every watch and waits for them.
func (m *monitor) stop() {
	m.cancel()
	m.wg.Wait()
}

// broadcast wakes every waiter; m.mu is held.
func (m *monitor) broadcast() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *monitor) onJob(obj any, deleted bool) {
	job, ok := obj.(*rayv1.RayJob)
	if !ok || job.Name != m.name {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if deleted {
		m.jobGone = true
	} else {
		if m.job == nil || m.job.Status.JobDeploymentStatus != job.Status.JobDeploymentStatus {
			m.notify.info(fmt.Sprintf("RayJob %s/%s: %s", m.ns, m.name, deploymentStatus(job)))
		}
		m.job = job
	}
	if rc := job.Status.RayClusterName; rc != "" && m.podsFor == "" {
		m.podsFor = rc
		m.watchPods(rc)
	}
	if msg := replicaFailure(job); msg != "" {
		m.warnLocked("RayCluster "+job.Status.RayClusterName+": "+msg, "replica:"+msg)
	}
	m.broadcast()
}

// watchPods starts watching the pods of RayCluster rc; m.mu is held.
func (m *monitor) watchPods(rc string) {
	pods := m.kube.CoreV1().Pods(m.ns)
	sel := labels.SelectorFromSet(labels.Set{labelCluster: rc}).String()
	m.run(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return pods.Watch(ctx, o)
		},
	}, m.kube, &corev1.Pod{}, m.onPod, func() { m.set(func() { m.podsSync = true }) })
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
	if deleted {
		delete(m.pods, pod.Name)
	} else {
		m.pods[pod.Name] = pod
	}
	m.broadcast()
}

// onEvent reports each distinct warning about this RayJob, its RayCluster
// and its pods (whose names all start with the RayJob's name).
func (m *monitor) onEvent(obj any, deleted bool) {
	ev, ok := obj.(*corev1.Event)
	if !ok || deleted || ev.Type != corev1.EventTypeWarning || !strings.HasPrefix(ev.InvolvedObject.Name, m.name) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fatalEvent(ev.Reason) && m.fatal == nil && !eventTime(ev).Before(m.started.Add(-eventSkew)) {
		m.fatal = &ClusterError{RayJob: m.ns + "/" + m.name, Reason: ev.Reason,
			Message: ev.InvolvedObject.Kind + " " + ev.InvolvedObject.Name + ": " + ev.Message}
		m.broadcast()
	}
	key := ev.InvolvedObject.Kind + "/" + ev.Reason + "/" + ev.Message
	m.warnLocked(fmt.Sprintf("%s %s: %s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, oneLine(ev.Message, 400)), key)
}

// warnOnce notifies msg once per key.
func (m *monitor) warnOnce(msg, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.warnLocked(msg, key)
}

// warnLocked notifies msg once per key; m.mu is held.
func (m *monitor) warnLocked(msg, key string) {
	if m.warned[key] {
		return
	}
	m.warned[key] = true
	m.notify.warn(msg)
}

// view is a consistent copy of what the monitor knows.
type view struct {
	job      *rayv1.RayJob
	jobGone  bool
	pods     []*corev1.Pod
	podsSync bool
	jobSync  bool
	ready    bool
	leaving  bool
	denied   error
	fatal    error
}

// await calls check with the latest view after every change until it
// returns done or an error, or ctx ends. check may ask to be called again
// after a delay even without a change.
func (m *monitor) await(ctx context.Context, check func(v view) (done bool, err error, again time.Duration)) error {
	for {
		m.mu.Lock()
		v := view{job: m.job, jobGone: m.jobGone, podsSync: m.podsSync, jobSync: m.jobSync, ready: m.isReady, leaving: m.leaving, denied: m.denied, fatal: m.fatal}
		for _, k := range slices.Sorted(maps.Keys(m.pods)) {
			v.pods = append(v.pods, m.pods[k])
		}
		changed := m.changed
		m.mu.Unlock()
		done, err, again := check(v)
		if done || err != nil {
			return err
		}
		if err := m.sleep(ctx, changed, again); err != nil {
			return err
		}
	}
}

// sleep waits for changed, for again when it is positive, or for ctx.
func (m *monitor) sleep(ctx context.Context, changed <-chan struct{}, again time.Duration) error {
	var timer <-chan time.Time
	if again > 0 {
		t := time.NewTimer(again)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-changed:
	case <-timer:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-m.ctx.Done():
		return fmt.Errorf("RayJob %s/%s: no longer watched", m.ns, m.name)
	}
	return nil
}

// set changes a flag under the lock and wakes the waiters.
func (m *monitor) set(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
	m.broadcast()
}

// problem returns the first infrastructure failure v shows, or nil and
// when to look again (an Unschedulable pod within its grace). Once the
// cluster was ready, a broken worker is only a warning: Ray may carry on
// without it (KubeRay replaces it); a broken head or RayJob is fatal.
func (m *monitor) problem(v view) (error, time.Duration) {
	if v.leaving {
		return nil, 0
	}
	if v.denied != nil {
		return v.denied, 0
	}
	if v.fatal != nil && !v.ready {
		return v.fatal, 0
	}
	if v.jobGone {
		return &ClusterError{RayJob: m.ns + "/" + m.name, Reason: "Deleted",
			Message: "the RayJob was deleted by someone other than this step"}, 0
	}
	if v.job != nil {
		if _, err := jobState(v.job); err != nil {
			return err, 0
		}
	}
	var again time.Duration
	for _, p := range v.pods {
		perr, wait := podProblem(p, m.now(), m.grace)
		if wait > 0 && (again == 0 || wait < again) {
			again = wait
		}
		if perr == nil {
			continue
		}
		perr.RayJob = m.ns + "/" + m.name
		if v.ready && !isHead(p) {
			m.warnOnce(perr.Error(), "pod/"+p.Name+"/"+perr.Reason)
			continue
		}
		return perr, 0
	}
	return nil, again
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
// such as a quota that frees up, only shows as a warning.)
func fatalEvent(reason string) bool {
	switch reason {
	case "AutoscalerServiceAccountNotFound", "InvalidRayClusterSpec", "InvalidRayClusterMetadata",
		"InvalidRayJobSpec", "InvalidRayJobMetadata":
		return true
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
