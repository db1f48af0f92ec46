// Package ui serves `raystep ui`: a read-only web page and JSON API of the
// clusters raystep runs, kept live by one set of watches per process.
//
// Store owns the records (the same kuberay.Summary values `raystep ls -o
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

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/raystep/raystep/runner/kuberay"
)

// Record is one cluster as the page shows it: its `raystep ls` summary and
// the Dagster asset it materializes, if any.
type Record struct {
	kuberay.Summary
	// Asset is the step's Dagster asset keys (slash-joined parts, comma
	// between keys), from the RayJob's annotation.
	Asset string
}

// Key names a record uniquely: its kind, namespace and name.
func (r *Record) Key() string { return r.ClusterKind + "/" + r.Namespace + "/" + r.Name }

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
	mu   sync.RWMutex
	rows map[string]*Record
	subs map[chan Change]struct{}
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
		s.rows[c.Key] = c.Record
	}
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

// Watch lists and watches raystep's RayJobs and interactive RayClusters in
// namespace (every namespace when empty), keeps s up to date until ctx is
// done, and returns once both caches have synced.
func (s *Store) Watch(ctx context.Context, ray rayclient.Interface, namespace string) error {
	jobs := labels.SelectorFromSet(labels.Set{kuberay.LabelManagedBy: kuberay.ManagedByRaystep}).String()
	clusters := kuberay.ClusterSelector // interactive and run-scoped
	informers := []cache.SharedIndexInformer{
		s.informer(&rayv1.RayJob{}, &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = jobs
				return ray.RayV1().RayJobs(namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = jobs
				return ray.RayV1().RayJobs(namespace).Watch(ctx, o)
			},
		}),
		s.informer(&rayv1.RayCluster{}, &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = clusters
				return ray.RayV1().RayClusters(namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = clusters
				return ray.RayV1().RayClusters(namespace).Watch(ctx, o)
			},
		}),
	}
	synced := make([]cache.InformerSynced, len(informers))
	for i, inf := range informers {
		go inf.RunWithContext(ctx)
		synced[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("list raystep RayJobs and RayClusters in %s: %w", where(namespace), context.Cause(ctx))
	}
	return nil
}

// informer builds an informer whose events keep s's records of one
// cluster kind.
func (s *Store) informer(example runtime.Object, lw cache.ListerWatcher) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
	put := func(obj any) {
		if r := record(obj); r != nil {
			s.Put(r)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    put,
		UpdateFunc: func(_, obj any) { put(obj) },
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if r := record(obj); r != nil {
				s.Remove(r.Key()) // the key Put gave it: a run cluster's kind is run
			}
		},
	})
	return inf
}

// record summarizes a watched object; nil for anything else.
func record(obj any) *Record {
	switch o := obj.(type) {
	case *rayv1.RayJob:
		return &Record{Summary: kuberay.Summarize(o), Asset: o.Annotations[kuberay.AnnotationAssetKey]}
	case *rayv1.RayCluster:
		return &Record{Summary: kuberay.SummarizeCluster(o)}
	}
	return nil
}

func where(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}
