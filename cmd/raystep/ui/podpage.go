package ui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/tools/cache"

	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// Pods holds the Ray pods (those KubeRay labels with their RayCluster)
// and the warning events the watches see, for the cluster pages. Its zero
// value is empty and usable; Watch fills it.
type Pods struct {
	mu      sync.RWMutex
	pods    map[string]*corev1.Pod   // namespace/name
	events  map[string]*corev1.Event // namespace/name, warnings only
	changed chan struct{}            // closed at the next change
}

// Changed returns a channel closed at the next change.
func (p *Pods) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

func (p *Pods) set(obj any, deleted bool) {
	if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = gone.Obj, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pods == nil {
		p.pods, p.events = map[string]*corev1.Pod{}, map[string]*corev1.Event{}
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		put(p.pods, o.Namespace+"/"+o.Name, o, deleted)
	case *corev1.Event:
		put(p.events, o.Namespace+"/"+o.Name, o, deleted)
	default:
		return
	}
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

func put[T any](m map[string]T, key string, v T, deleted bool) {
	if deleted {
		delete(m, key)
	} else {
		m[key] = v
	}
}

// Watch lists and watches Ray pods and warning events in namespace (every
// namespace when empty), keeps p up to date until ctx is done, and
// returns once both caches have synced.
func (p *Pods) Watch(ctx context.Context, kube kubeapi.Interface, namespace string) error {
	srcs := pageSources(kube, namespace)
	if err := preflight(ctx, srcs, namespace); err != nil {
		return err
	}
	put, remove := func(obj any) { p.set(obj, false) }, func(obj any) { p.set(obj, true) }
	synced := make([]cache.InformerSynced, len(srcs))
	for i, src := range srcs {
		inf := src.newInformer(put, remove)
		go inf.RunWithContext(ctx)
		synced[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("list Ray pods and warning events in %s: %w", where(namespace), context.Cause(ctx))
	}
	return nil
}

// pageSources are what the cluster pages watch besides the list's kinds:
// every pod of a RayCluster in namespace, and the warning events there.
func pageSources(kube kubeapi.Interface, namespace string) []source {
	pods, events := kube.CoreV1().Pods(namespace), kube.CoreV1().Events(namespace)
	return []source{
		{resource: "pods", example: &corev1.Pod{}, selector: kuberay.LabelCluster, // any value
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) }, watch: pods.Watch},
		{resource: "events", example: &corev1.Event{}, fields: fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String(),
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return events.List(ctx, o) }, watch: events.Watch},
	}
}

// PodRow is one pod of a cluster as its page shows it.
type PodRow struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Phase    string `json:"phase"`
	Node     string `json:"node"`
	Restarts int32  `json:"restarts"`
	Age      string `json:"age"`
	// Reason and Message say why the pod cannot run, as a step would fail
	// on it (Unschedulable, ImagePullBackOff, ...); empty when it can.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// EventRow is one warning about a cluster, its RayJob or its pods.
type EventRow struct {
	Object  string `json:"object"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
	Last    string `json:"last"`
}

// Of returns the pods of RayCluster cluster in namespace ns, head first,
// and the warnings about it, its pods or the object named owner (its
// RayJob), newest first.
func (p *Pods) Of(ns, cluster, owner string, now time.Time) ([]PodRow, []EventRow) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	pods := []PodRow{}
	names := map[string]bool{}
	for _, pod := range p.pods {
		if pod.Namespace != ns || cluster == "" || pod.Labels[kuberay.LabelCluster] != cluster {
			continue
		}
		names[pod.Name] = true
		pods = append(pods, podRow(pod, now))
	}
	slices.SortFunc(pods, func(a, b PodRow) int {
		if a.Role != b.Role {
			return strings.Compare(a.Role, b.Role) // head before worker
		}
		return strings.Compare(a.Name, b.Name)
	})
	type dated struct {
		row  EventRow
		when time.Time
	}
	var found []dated
	for _, ev := range p.events {
		o := ev.InvolvedObject
		if ev.Namespace != ns || !(names[o.Name] || o.Name == cluster && cluster != "" || o.Name == owner ||
			o.Kind == "Pod" && cluster != "" && strings.HasPrefix(o.Name, cluster+"-")) {
			continue
		}
		when := kuberay.EventTime(ev)
		found = append(found, dated{EventRow{Object: o.Kind + " " + o.Name, Reason: ev.Reason, Message: ev.Message,
			Count: max(ev.Count, 1), Last: duration.HumanDuration(now.Sub(when)) + " ago"}, when})
	}
	slices.SortFunc(found, func(a, b dated) int { return b.when.Compare(a.when) })
	events := make([]EventRow, len(found))
	for i, d := range found {
		events[i] = d.row
	}
	return pods, events
}

func podRow(pod *corev1.Pod, now time.Time) PodRow {
	r := PodRow{Name: pod.Name, Role: "worker", Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName,
		Age: duration.HumanDuration(now.Sub(pod.CreationTimestamp.Time))}
	if kuberay.IsHeadPod(pod) {
		r.Role = "head"
	}
	if pod.DeletionTimestamp != nil {
		r.Phase = "Terminating"
	}
	for _, cs := range pod.Status.ContainerStatuses {
		r.Restarts += cs.RestartCount
	}
	r.Reason, r.Message = kuberay.PodTrouble(pod, now)
	return r
}
