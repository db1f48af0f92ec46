package kuberay

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// listWatcher is the List and Watch of a typed client.
type listWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// selected lists and watches c's objects with the selector narrow sets.
func selected[L runtime.Object](c listWatcher[L], narrow func(*metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return c.Watch(ctx, o)
		},
	}
}

// watchGone returns once the object name of the client's namespace does not
// exist, watching for its deletion when it still does. clientset is the
// clientset behind client (it tells whether the client supports watch-list).
// A list or watch the API server refuses ends it with that error at once
// (see refused) instead of being retried until ctx ends.
func watchGone[L runtime.Object](ctx context.Context, client listWatcher[L], clientset any, name string, obj runtime.Object) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := selected(client, func(o *metav1.ListOptions) { o.FieldSelector = sel })
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		l, err := list(ctx, o)
		if refused(err) {
			cancel(err)
		}
		return l, err
	}
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFn(ctx, o)
		if refused(err) {
			cancel(err)
		}
		return w, err
	}
	named := func(o any) bool {
		m, err := metaName(o)
		return err == nil && m == name
	}
	_, err := watchtools.UntilWithSync(ctx, cache.ToListWatcherWithWatchListSemantics(lw, clientset), obj,
		func(store cache.Store) (bool, error) {
			for _, o := range store.List() {
				if named(o) {
					return false, nil
				}
			}
			return true, nil
		},
		func(ev watch.Event) (bool, error) { return ev.Type == watch.Deleted && named(ev.Object), nil })
	if cause := context.Cause(ctx); err != nil && refused(cause) {
		return cause
	}
	return err
}

// metaName returns an object's name.
func metaName(o any) (string, error) {
	acc, err := meta.Accessor(o)
	if err != nil {
		return "", err
	}
	return acc.GetName(), nil
}
