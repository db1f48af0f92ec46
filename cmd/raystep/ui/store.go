// Package ui serves `raystep ui`: a read-only web page and JSON API of the
// clusters raystep runs, kept live by one set of watches per process.
//
// Store owns the records (the same fleet.Record values `raystep ls -o
// json` prints), fed by informers on raystep's RayJobs and interactive
// RayClusters; Server renders them as HTML, JSON and server-sent events
// and enforces who may read them (see Auth). Creating, changing or
// deleting clusters is left to the other commands: nothing here writes to
// Kubernetes.
package ui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// Record is one cluster as the page shows it: its `raystep ls` record and
// what the page adds to it.
type Record struct {
	fleet.Record
	// Problem is why its pods cannot run ("ImagePullBackOff: ..."), from
	// the pod watch; empty when they can.
	Problem string
	// GPUSpans are the GPUs its running pods hold and since when;
	// GPUBanked the GPU time of its pods already gone.
	GPUSpans  []GPUSpan
	GPUBanked time.Duration
}

// local reports whether r is a head on this machine (the local backend's).
func (r *Record) local() bool { return r.Backend == fleet.BackendLocal }

// Key names a record uniquely: its kind, namespace (LocalNamespace for a
// local head) and name.
func (r *Record) Key() string { return r.ClusterKind + "/" + r.pathNamespace() + "/" + r.Name }

// LocalNamespace stands for the namespace of a local head in keys and
// URLs: local heads have none, and no Kubernetes namespace starts with "_".
const LocalNamespace = "_local"

func (r *Record) pathNamespace() string {
	if r.local() {
		return LocalNamespace
	}
	return r.Namespace
}

// GPUTime is the GPU time r's pods have held until now.
func (r *Record) GPUTime(now time.Time) time.Duration {
	t := r.GPUBanked
	for _, s := range r.GPUSpans {
		t += time.Duration(s.GPUs) * now.Sub(s.Since)
	}
	return t
}

// Change is one record added, changed (Record set) or removed (Record nil).
type Change struct {
	Key    string
	Record *Record
}

// subscriberBuffer is how many changes a slow subscriber may lag behind
// before it is dropped (its browser reconnects and gets a fresh snapshot).
const subscriberBuffer = 256

// Store holds the records of every raystep cluster the watches see. Its
// zero value is empty and usable; Watch fills it.
type Store struct {
	mu     sync.RWMutex
	rows   map[string]*Record
	subs   map[chan Change]struct{}
	pods   map[string]pod           // namespace/pod of the Ray pods
	banked map[string]time.Duration // GPU time of gone pods, by namespace/RayCluster
}

// Put adds or replaces r and tells subscribers.
func (s *Store) Put(r *Record) { s.apply(Change{Key: r.Key(), Record: r}) }

// Remove deletes the record named key, if present, and tells subscribers.
func (s *Store) Remove(key string) { s.apply(Change{Key: key}) }

func (s *Store) apply(c Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[string]*Record{}
	}
	if c.Record == nil {
		if _, ok := s.rows[c.Key]; !ok {
			return
		}
		delete(s.rows, c.Key)
	} else {
		c.Record = s.withPodsLocked(c.Record)
		s.rows[c.Key] = c.Record
	}
	s.notifyLocked(c)
}

// notifyLocked hands c to every subscriber.
func (s *Store) notifyLocked(c Change) {
	for ch := range s.subs {
		select {
		case ch <- c:
		default: // too far behind: drop it, its reader sees the channel closed
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// Records returns every record, sorted by namespace, kind (steps first) and name.
func (s *Store) Records() []*Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sortedLocked()
}

func (s *Store) sortedLocked() []*Record {
	out := make([]*Record, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Record) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(b.ClusterKind, a.ClusterKind); c != 0 { // "step" before "interactive"
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Subscribe returns the current records and a channel of every later
// change, in order, until cancel is called or the subscriber falls
// subscriberBuffer changes behind (then the channel is closed).
func (s *Store) Subscribe() (snapshot []*Record, changes <-chan Change, cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan Change, subscriberBuffer)
	if s.subs == nil {
		s.subs = map[chan Change]struct{}{}
	}
	s.subs[ch] = struct{}{}
	return s.sortedLocked(), ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// Watch lists and watches raystep's RayJobs, interactive and run-scoped
// RayClusters and their Ray pods in namespace (every namespace when
// empty), keeps s up to date until ctx is done, and returns once every
// cache has synced.
func (s *Store) Watch(ctx context.Context, kube kubeapi.Interface, ray kubeapi.RayInterface, namespace string) error {
	srcs := sources(kube, ray, namespace)
	if err := preflight(ctx, srcs, namespace); err != nil {
		return err
	}
	informers := []cache.SharedIndexInformer{
		s.informer(srcs[0]), s.informer(srcs[1]), s.podInformer(srcs[2]),
	}
	synced := make([]cache.InformerSynced, len(informers))
	for i, inf := range informers {
		go inf.RunWithContext(ctx)
		synced[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("list raystep RayJobs, RayClusters and Ray pods in %s: %w", where(namespace), context.Cause(ctx))
	}
	return nil
}

// source is one kind the store watches, restricted to raystep's objects.
type source struct {
	resource string // as RBAC names it
	example  runtime.Object
	selector string // labels
	list     func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch    func(context.Context, metav1.ListOptions) (watch.Interface, error)
	fields   string // field selector, "" for none
}

// sources are the RayJobs, the RayClusters and the Ray pods of raystep
// in namespace, in that order.
func sources(kube kubeapi.Interface, ray kubeapi.RayInterface, namespace string) []source {
	jobs, clusters, pods := ray.RayV1().RayJobs(namespace), ray.RayV1().RayClusters(namespace), kube.CoreV1().Pods(namespace)
	return []source{
		{"rayjobs.ray.io", &rayv1.RayJob{}, kuberay.LabelManagedBy + "=" + kuberay.ManagedByRaystep,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return jobs.List(ctx, o) }, jobs.Watch, ""},
		{"rayclusters.ray.io", &rayv1.RayCluster{}, kuberay.ClusterSelector, // interactive and run-scoped
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return clusters.List(ctx, o) }, clusters.Watch, ""},
		{"pods", &corev1.Pod{}, kuberay.LabelManagedBy + "=" + kuberay.ManagedByRaystep + "," + labelRayCluster,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) }, pods.Watch, ""},
	}
}

// newInformer returns an informer of src that calls put with every
// object added or changed and remove with every object deleted.
func (src source) newInformer(put, remove func(obj any)) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector, o.FieldSelector = src.selector, src.fields
			return src.list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector, o.FieldSelector = src.selector, src.fields
			return src.watch(ctx, o)
		},
	}, src.example, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    put,
		UpdateFunc: func(_, obj any) { put(obj) },
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			remove(obj)
		},
	})
	return inf
}

// informer builds an informer of src whose events keep s's records of
// one cluster kind.
func (s *Store) informer(src source) cache.SharedIndexInformer {
	return src.newInformer(func(obj any) {
		if r := record(obj); r != nil {
			s.Put(r)
		}
	}, func(obj any) {
		if r := record(obj); r != nil {
			s.Remove(r.Key()) // the key Put gave it: a run cluster's kind is run
		}
	})
}

// record summarizes a watched object; nil for anything else.
func record(obj any) *Record {
	switch o := obj.(type) {
	case *rayv1.RayJob:
		r := &Record{Record: kuberay.Summarize(o)}
		if done := o.Annotations[kuberay.AnnotationJobStatus]; done != "" {
			r.JobStatus = done // the step's word on how the job ended: KubeRay's may lag
		}
		return r
	case *rayv1.RayCluster:
		return &Record{Record: kuberay.SummarizeCluster(o)}
	}
	return nil
}

func where(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}

// preflight lists and watches each source once, so a missing permission
// fails `raystep ui` at once, naming the verb and the resource, instead of
// leaving an informer retrying in silence.
func preflight(ctx context.Context, srcs []source, namespace string) error {
	for _, src := range srcs {
		o := metav1.ListOptions{LabelSelector: src.selector, FieldSelector: src.fields, Limit: 1}
		if _, err := src.list(ctx, o); err != nil {
			return fmt.Errorf("list %s in %s: %w (raystep ui needs list and watch on %s)", src.resource, where(namespace), err, src.resource)
		}
		w, err := src.watch(ctx, metav1.ListOptions{LabelSelector: src.selector, FieldSelector: src.fields, TimeoutSeconds: ptr(int64(1))})
		if err != nil {
			return fmt.Errorf("watch %s in %s: %w (raystep ui needs list and watch on %s)", src.resource, where(namespace), err, src.resource)
		}
		w.Stop()
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// SetLocal replaces the records of local heads with records (each marked
// as the local backend's), telling subscribers of what changed.
func (s *Store) SetLocal(records []*Record) {
	next := map[string]*Record{}
	for _, r := range records {
		r.Backend = fleet.BackendLocal
		next[r.Key()] = r
	}
	s.mu.RLock()
	var gone []string
	var changed []*Record
	for key, r := range s.rows {
		if r.local() && next[key] == nil {
			gone = append(gone, key)
		}
	}
	for key, r := range next {
		if old := s.rows[key]; old == nil || !sameRecord(old.Record, r.Record) {
			changed = append(changed, r)
		}
	}
	s.mu.RUnlock()
	for _, key := range gone {
		s.Remove(key)
	}
	for _, r := range changed {
		s.Put(r)
	}
}

// sameRecord compares two records, their expiry by value.
func sameRecord(a, b fleet.Record) bool {
	ea, eb := a.Expires, b.Expires
	a.Expires, b.Expires = nil, nil
	return a == b && (ea == nil) == (eb == nil) && (ea == nil || ea.Equal(*eb))
}
