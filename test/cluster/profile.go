package cluster

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/raystep/raystep/schemas"
)

// ProfileNodes derives fake nodes from a platform profile, the way a
// platform team's real GPU pools look to the scheduler: for each GPU type
// (all of the profile's when gpuTypes is empty, sorted by name) one node
// named gpu-<type>-0 carrying the type's node-selector labels, a taint for
// each of its tolerations and 8 GPUs of its resource name (or the type's
// per-worker cap when that is larger); then one CPU node, cpu-0, without
// taints. GPU types not listed get no node, so a step asking for them is
// really Unschedulable.
func ProfileNodes(p *schemas.Profile, gpuTypes ...string) []NodeSpec {
	if len(gpuTypes) == 0 {
		for name := range p.Spec.GPUTypes {
			gpuTypes = append(gpuTypes, name)
		}
		slices.Sort(gpuTypes)
	}
	nodes := make([]NodeSpec, 0, len(gpuTypes)+1)
	for _, name := range gpuTypes {
		gpu, ok := p.Spec.GPUTypes[name]
		if !ok {
			continue
		}
		gpus := max(8, gpu.MaxPerWorker)
		n := NodeSpec{
			Name:   "gpu-" + name + "-0",
			Labels: gpu.NodeSelector,
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:                    resource.MustParse("96"),
				corev1.ResourceMemory:                 resource.MustParse("1Ti"),
				corev1.ResourcePods:                   resource.MustParse("110"),
				corev1.ResourceName(gpu.ResourceName): *resource.NewQuantity(int64(gpus), resource.DecimalSI),
			},
		}
		for _, tol := range gpu.Tolerations {
			n.Taints = append(n.Taints, taintFor(tol))
		}
		nodes = append(nodes, n)
	}
	return append(nodes, NodeSpec{Name: "cpu-0", Capacity: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}})
}

// taintFor returns a taint that the toleration tolerates: its key, its
// value (or "present" for an Exists toleration) and its effect (NoSchedule
// when the toleration tolerates every effect).
func taintFor(tol schemas.Toleration) corev1.Taint {
	value := tol.Value
	if tol.Operator == string(corev1.TolerationOpExists) {
		value = "present"
	}
	effect := corev1.TaintEffect(tol.Effect)
	if effect == "" {
		effect = corev1.TaintEffectNoSchedule
	}
	return corev1.Taint{Key: tol.Key, Value: value, Effect: effect}
}
