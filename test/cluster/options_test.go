package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr bool
	}{
		{name: "zero value", opts: Options{}},
		{name: "loopback dashboard and CIDR", opts: Options{DashboardURL: "http://127.0.0.1:8265", PodCIDR: "127.9.0.0/16"}},
		{name: "https dashboard", opts: Options{DashboardURL: "https://127.0.0.1:8265"}, wantErr: true},
		{name: "dashboard without host", opts: Options{DashboardURL: "http://"}, wantErr: true},
		{name: "private pod CIDR", opts: Options{PodCIDR: "10.0.0.0/24"}, wantErr: true},
		{name: "CIDR wider than loopback", opts: Options{PodCIDR: "127.0.0.0/7"}, wantErr: true},
		{name: "IPv6 pod CIDR", opts: Options{PodCIDR: "::1/128"}, wantErr: true},
		{name: "repeated node", opts: Options{Nodes: []NodeSpec{{Name: "a"}, {Name: "a"}}}, wantErr: true},
		{name: "unnamed node", opts: Options{Nodes: []NodeSpec{{}}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.validate()
			if got := err != nil; got != tt.wantErr {
				t.Errorf("validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestNodeState(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	tests := []struct {
		name string
		node corev1.Node
		want string
	}{
		{name: "ready", node: corev1.Node{Status: corev1.NodeStatus{Conditions: ready}}, want: ""},
		{name: "no conditions yet", node: corev1.Node{}, want: "not Ready"},
		{
			name: "not-ready taint still on",
			node: corev1.Node{
				Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}},
				Status: corev1.NodeStatus{Conditions: ready},
			},
			want: "tainted " + corev1.TaintNodeNotReady,
		},
		{
			name: "GPU taint is the profile's, not ours",
			node: corev1.Node{
				Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}},
				Status: corev1.NodeStatus{Conditions: ready},
			},
			want: "",
		},
		{name: "cordoned", node: corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: ready}}, want: "unschedulable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, nodeState(&tt.node)); diff != "" {
				t.Errorf("nodeState (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodWaitingAnnotationsMatchStage(t *testing.T) {
	// The stage selects on the reason annotation; the helper must set it.
	got := PodWaitingAnnotations("ImagePullBackOff", "m")
	want := map[string]string{
		"waiting.stage.raystep.dev/reason":      "ImagePullBackOff",
		"waiting.stage.raystep.dev/message":     "m",
		"pod-create.stage.kwok.x-k8s.io/weight": "0",
		"pod-ready.stage.kwok.x-k8s.io/weight":  "0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}
