package cluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/raystep/raystep/schemas"
)

// CPUFlavor is the ResourceFlavor of CPU and memory in ProfileQueues: it
// has no node labels, so Kueue pins no pod to a node pool for them.
const CPUFlavor = "cpu"

// KueueObject returns a Kueue object of kind (KueueAPIVersion) named name
// in namespace ns ("" for a cluster-scoped kind) with the given spec.
func KueueObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(KueueAPIVersion)
	u.SetKind(kind)
	u.SetName(name)
	u.SetNamespace(ns)
	return u
}

// FlavorQuota is one flavor of a ClusterQueue's resource group and the
// nominal quota it gives each resource the group covers.
type FlavorQuota struct {
	Flavor string
	Quota  corev1.ResourceList
}

// ResourceGroup is one resource group of a ClusterQueue: the resources
// of the first flavor's quota, and every flavor's quotas of them.
func ResourceGroup(flavors ...FlavorQuota) map[string]any {
	var names []string
	for n := range flavors[0].Quota {
		names = append(names, string(n))
	}
	slices.Sort(names)
	covered := make([]any, 0, len(names))
	for _, n := range names {
		covered = append(covered, n)
	}
	var list []any
	for _, f := range flavors {
		var resources []any
		for _, n := range names {
			q := f.Quota[corev1.ResourceName(n)]
			resources = append(resources, map[string]any{"name": n, "nominalQuota": q.String()})
		}
		list = append(list, map[string]any{"name": f.Flavor, "resources": resources})
	}
	return map[string]any{"coveredResources": covered, "flavors": list}
}

// ProfileQueues returns Kueue queues for the profile's GPU pools as
// ProfileNodes makes them, with namespace's LocalQueues named as the
// profile names them. Flavors: CPUFlavor for CPU and memory, and per GPU
// type "gpu-<type>" with the type's node selector for its GPUs. Queues:
// per GPU type that names a queue (every type when the profile names no
// queue for all), a ClusterQueue "gpu-<type>" with the pool's GPUs and
// the CPU and memory of its node and the CPU node, and its LocalQueue (the
// type's queue, else the type's name); when the profile names a queue for
// all steps, a ClusterQueue "all" with every node's resources and that
// LocalQueue.
func ProfileQueues(p *schemas.Profile, namespace string) []*unstructured.Unstructured {
	nodes := ProfileNodes(p)
	cpuNode := nodes[len(nodes)-1].Capacity
	objs := []*unstructured.Unstructured{KueueObject("ResourceFlavor", "", CPUFlavor, map[string]any{})}
	queue := func(cq, lq string, groups ...any) {
		objs = append(objs,
			KueueObject("ClusterQueue", "", cq, map[string]any{"namespaceSelector": map[string]any{}, "resourceGroups": groups}),
			KueueObject("LocalQueue", namespace, lq, map[string]any{"clusterQueue": cq}))
	}
	all := cpuMemory(cpuNode)
	gpus := map[corev1.ResourceName][]FlavorQuota{}
	var resources []corev1.ResourceName
	for _, n := range nodes[:len(nodes)-1] {
		name := n.Name[len("gpu-") : len(n.Name)-len("-0")]
		gpu := p.Spec.GPUTypes[name]
		flavor, res := "gpu-"+name, corev1.ResourceName(gpu.ResourceName)
		labels := map[string]any{}
		for k, v := range gpu.NodeSelector {
			labels[k] = v
		}
		objs = append(objs, KueueObject("ResourceFlavor", "", flavor, map[string]any{"nodeLabels": labels}))
		own := FlavorQuota{Flavor: flavor, Quota: corev1.ResourceList{res: n.Capacity[res]}}
		if _, ok := gpus[res]; !ok {
			resources = append(resources, res)
		}
		gpus[res] = append(gpus[res], own)
		addCPUMemory(all, n.Capacity)
		if gpu.Queue != "" || p.Spec.Queue == "" {
			cpu := cpuMemory(cpuNode)
			addCPUMemory(cpu, n.Capacity)
			queue(flavor, queueName(gpu.Queue, name), ResourceGroup(FlavorQuota{Flavor: CPUFlavor, Quota: cpu}), ResourceGroup(own))
		}
	}
	if p.Spec.Queue != "" {
		groups := []any{ResourceGroup(FlavorQuota{Flavor: CPUFlavor, Quota: all})}
		for _, res := range resources {
			groups = append(groups, ResourceGroup(gpus[res]...))
		}
		queue("all", p.Spec.Queue, groups...)
	}
	return objs
}

// cpuMemory copies the CPU and memory of a node's capacity.
func cpuMemory(capacity corev1.ResourceList) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: capacity[corev1.ResourceCPU].DeepCopy(), corev1.ResourceMemory: capacity[corev1.ResourceMemory].DeepCopy()}
}

// addCPUMemory adds a node's CPU and memory to sum.
func addCPUMemory(sum, capacity corev1.ResourceList) {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q := sum[r]
		q.Add(capacity[r])
		sum[r] = q
	}
}

func queueName(q, def string) string {
	if q != "" {
		return q
	}
	return def
}

// CreateKueueObjects creates objs in order; objects that exist are left
// as they are.
func (c *Cluster) CreateKueueObjects(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}
