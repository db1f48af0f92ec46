package kuberay

import (
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConcerns: a monitor hears the warnings about its own RayJob or
// RayCluster and their pods, and not those of a cluster whose name starts
// with the same letters (alice-dev is not alice-dev2 nor alice-dev-2).
func TestConcerns(t *testing.T) {
	t.Parallel()
	workers := rayv1.RayClusterSpec{WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "workers"}}}
	interactive := &monitor{kind: kindRayCluster, name: "alice-dev",
		rc: &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "alice-dev"}, Spec: workers}}
	step := &monitor{name: "ads-train-k3x9z"}
	stepLater := &monitor{name: "ads-train-k3x9z", job: &rayv1.RayJob{
		Spec:   rayv1.RayJobSpec{RayClusterSpec: &workers},
		Status: rayv1.RayJobStatus{RayClusterName: "ads-train-k3x9z-q2w8e"}}}
	long := "a-cluster-name-long-enough-that-kuberay-cuts-its-pod-names" // to 50 characters
	longOne := &monitor{kind: kindRayCluster, name: long}
	for _, tt := range []struct {
		m          *monitor
		kind, name string
		want       bool
	}{
		{interactive, "RayCluster", "alice-dev", true},
		{interactive, "RayCluster", "alice-dev2", false},
		{interactive, "RayCluster", "alice-dev-2", false},
		{interactive, "Pod", "alice-dev-head-x7k2p", true},
		{interactive, "Pod", "alice-dev-head", true},
		{interactive, "Pod", "alice-dev-workers-worker-a1b2c", true},
		{interactive, "Pod", "alice-dev-2-head-x7k2p", false},
		{interactive, "Pod", "alice-dev2-head-x7k2p", false},
		{interactive, "Pod", "alice-dev-gpu-workers-worker-a1b2c", false},
		{interactive, "Service", "alice-dev-head-svc", true},
		{interactive, "Service", "alice-dev-2-head-svc", false},
		{interactive, "Secret", "alice-dev-ray-auth", true},
		{step, "RayJob", "ads-train-k3x9z", true},
		{step, "RayJob", "ads-train-k3x9z2", false},
		{step, "RayCluster", "ads-train-k3x9z-q2w8e", true},
		{step, "RayCluster", "ads-train-k3x9z-2-q2w8e", false},
		{stepLater, "RayCluster", "ads-train-k3x9z-q2w8e", true},
		{stepLater, "RayCluster", "ads-train-k3x9z-zzzzz", false},
		{stepLater, "Pod", "ads-train-k3x9z-q2w8e-head-m4n5b", true},
		{stepLater, "Pod", "ads-train-k3x9z-q2w8e-workers-worker-m4n5b", true},
		{stepLater, "Pod", "ads-train-k3x9z-zzzzz-head-m4n5b", false},
		{longOne, "Pod", long[:50] + "-head-m4n5b", true},
	} {
		tt.m.pods = nil
		if got := tt.m.concerns(tt.kind, tt.name); got != tt.want {
			t.Errorf("monitor of %s (%s): concerns(%s %s) = %v, want %v", tt.m.name, tt.m.subject(), tt.kind, tt.name, got, tt.want)
		}
	}
}
