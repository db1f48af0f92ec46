package kuberay

import "testing"

// TestPodRefusalIsFatal: KubeRay's warning that the API server refused a
// Ray pod for Pod Security (or as invalid) ends provisioning at once;
// a refusal that may clear by itself (a quota) does not.
func TestPodRefusalIsFatal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reason, message string
		want            bool
	}{
		{"FailedToCreateHeadPod", `Failed to create head Pod ml/, pods "rj-head-x" is forbidden: violates PodSecurity "restricted:latest": privileged (container "ray-head" must not set securityContext.privileged=true)`, true},
		{"FailedToCreateWorkerPod", `Failed to create worker Pod for the cluster ml/rj, pods "rj-gpu-worker-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`, true},
		{"FailedCreateWorkerPod", "FailedCreateWorkerPod\n" + `pods "rj-gpu-worker-x" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`, true},
		{"FailedToCreateHeadPod", "Failed to create head Pod ml/, Pod \"rj-head-x\" is invalid: spec.containers[0].securityContext: Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true", true},
		{"FailedToCreateWorkerPod", `Failed to create worker Pod for the cluster ml/rj, pods "rj-gpu-worker-x" is forbidden: exceeded quota: gpu, requested: nvidia.com/gpu=1, used: nvidia.com/gpu=8, limited: nvidia.com/gpu=8`, false},
		{"FailedToCreateService", `Failed creating service ml/rj-head-svc, services "rj-head-svc" is invalid: x`, false},
	}
	for _, tt := range tests {
		if got := fatalEvent(tt.reason, tt.message); got != tt.want {
			t.Errorf("fatalEvent(%s, %q) = %v, want %v", tt.reason, tt.message, got, tt.want)
		}
	}
}
