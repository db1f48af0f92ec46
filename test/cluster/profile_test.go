package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/raystep/raystep/schemas"
)

func TestProfileNodesTolerateTheProfilesPods(t *testing.T) {
	t.Parallel()
	profile, err := schemas.LoadProfile("../../examples/platform.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		gpuTypes []string
		want     []string
	}{
		{"every GPU type", nil, []string{"gpu-a100-80gb-0", "gpu-l4-0", "cpu-0"}},
		{"one GPU type", []string{"a100-80gb"}, []string{"gpu-a100-80gb-0", "cpu-0"}},
		{"unknown GPU type gets no node", []string{"h100"}, []string{"cpu-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes := ProfileNodes(profile, tt.gpuTypes...)
			var got []string
			for _, n := range nodes {
				got = append(got, n.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("node names (-want +got):\n%s", diff)
			}
			for _, n := range nodes[:len(nodes)-1] {
				checkGPUNode(t, profile, n)
			}
		})
	}
}

// checkGPUNode checks that a pod placed the profile's way (its node
// selector and tolerations) fits the node: every label matches, every taint
// is tolerated, and the GPU resource is there.
func checkGPUNode(t *testing.T, p *schemas.Profile, n NodeSpec) {
	t.Helper()
	gpu := p.Spec.GPUTypes[n.Name[len("gpu-"):len(n.Name)-len("-0")]]
	for k, v := range gpu.NodeSelector {
		if n.Labels[k] != v {
			t.Errorf("%s: label %s=%q, want %q", n.Name, k, n.Labels[k], v)
		}
	}
	for _, taint := range n.Taints {
		tolerated := false
		for _, tol := range gpu.Tolerations {
			kt := corev1.Toleration{Key: tol.Key, Operator: corev1.TolerationOperator(tol.Operator), Value: tol.Value, Effect: corev1.TaintEffect(tol.Effect)}
			tolerated = tolerated || kt.ToleratesTaint(klog.Background(), &taint, false)
		}
		if !tolerated {
			t.Errorf("%s: taint %s is not tolerated by the profile", n.Name, taint.ToString())
		}
	}
	if q, ok := n.Capacity[corev1.ResourceName(gpu.ResourceName)]; !ok || q.IsZero() {
		t.Errorf("%s: no %s capacity", n.Name, gpu.ResourceName)
	}
}
