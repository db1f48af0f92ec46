package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/test/cluster"
)

// systemNamespaces are the API server's own namespaces and Kueue's; the
// sweep checks default for test objects, and never removes any of them.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease", cluster.KueueNamespace}

// sweepBound only catches a hang: the garbage collector removes what a
// deleted RayJob owned (its RayCluster, pods, Service, Lease, Secret,
// Workload) within seconds.
const sweepBound = 2 * time.Minute

// sweep runs after the whole suite. It waits until no namespace holds
// anything a test or a step created, finalizes the test namespaces the
// tests deleted (no namespace controller runs here, so they would stay
// Terminating), and returns what is still there: namespaces, their
// objects, and Kueue's cluster-wide objects. "" means the suite left
// nothing in the API server.
func sweep(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, sweepBound)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last []string // what the last complete look found
	var lastErr error
	for {
		left, err := sweepOnce(ctx)
		switch {
		case err == nil && len(left) == 0:
			return ""
		case err == nil:
			last = left
		case ctx.Err() == nil:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if len(last) == 0 && lastErr != nil {
				return lastErr.Error()
			}
			return strings.Join(last, "; ")
		case <-tick.C:
		}
	}
}

// sweepOnce finalizes every deleted namespace that is empty and lists
// what is left.
func sweepOnce(ctx context.Context) ([]string, error) {
	namespaces := &corev1.NamespaceList{}
	if err := shared.k8s.Client.List(ctx, namespaces); err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var left []string
	for _, ns := range namespaces.Items {
		objs, err := objectsIn(ctx, ns.Name)
		if err != nil {
			return nil, err
		}
		system := slices.Contains(systemNamespaces, ns.Name)
		switch {
		case len(objs) > 0:
			left = append(left, fmt.Sprintf("namespace %s: %s", ns.Name, strings.Join(objs, ", ")))
		case system:
		case ns.DeletionTimestamp == nil:
			left = append(left, "namespace "+ns.Name+" (never deleted)")
		default:
			ns.Spec.Finalizers = nil
			if _, err := shared.k8s.Clientset.CoreV1().Namespaces().Finalize(ctx, &ns, metav1.UpdateOptions{}); err != nil {
				return nil, fmt.Errorf("finalize namespace %s: %w", ns.Name, err)
			}
			left = append(left, "namespace "+ns.Name+" (finalizing)")
		}
	}
	kueue, err := listKinds(ctx, "", kueueClusterKinds)
	return append(left, kueue...), err
}

// namespacedKinds are what tests and steps create in a namespace.
var namespacedKinds = []client.ObjectList{
	&rayv1.RayJobList{}, &rayv1.RayClusterList{}, &corev1.PodList{}, &corev1.ServiceList{},
	&corev1.SecretList{}, &corev1.ConfigMapList{}, &corev1.ServiceAccountList{},
	&rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &coordinationv1.LeaseList{},
}

// Kueue's kinds, listed only where its CRDs are installed (the Kueue tests
// install them).
var (
	kueueNamespacedKinds = []schema.GroupVersionKind{
		{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"},
		{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "LocalQueueList"},
	}
	kueueClusterKinds = []schema.GroupVersionKind{
		{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ClusterQueueList"},
		{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ResourceFlavorList"},
	}
)

// objectsIn lists what a test or step left in ns, skipping the system
// namespaces but default, where the control plane keeps its own objects
// (bootstrap RBAC, node Leases, Kueue's certificates).
func objectsIn(ctx context.Context, ns string) ([]string, error) {
	if ns != "default" && slices.Contains(systemNamespaces, ns) {
		return nil, nil
	}
	var left []string
	for _, l := range namespacedKinds {
		if err := shared.k8s.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list %T in %s: %w", l, ns, err)
		}
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			obj := o.(client.Object)
			if ns == "default" && obj.GetName() == "kubernetes" { // the API server's own Service
				return nil
			}
			left = append(left, fmt.Sprintf("%s %s", strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", l), "*v1."), "List"), obj.GetName()))
			return nil
		})
	}
	kueue, err := listKinds(ctx, ns, kueueNamespacedKinds)
	return append(left, kueue...), err
}

// listKinds lists the unstructured kinds in ns ("" for cluster-scoped
// ones), skipping kinds the API server does not serve.
func listKinds(ctx context.Context, ns string, kinds []schema.GroupVersionKind) ([]string, error) {
	var left []string
	for _, gvk := range kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		var opts []client.ListOption
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		err := shared.k8s.Client.List(ctx, l, opts...)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s in %q: %w", gvk.Kind, ns, err)
		}
		for _, o := range l.Items {
			left = append(left, strings.TrimSuffix(gvk.Kind, "List")+" "+o.GetName())
		}
	}
	return left, nil
}
