package cluster

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed stages/pod-waiting.yaml
var podWaitingStage []byte

// PodWaitingAnnotations returns the annotations that make kwok hold a pod
// Pending with every container waiting for reason (e.g. "ImagePullBackOff")
// and message, as a kubelet would report it. Put them on a pod template,
// such as a RayJob's head group template, to fail provisioning for real.
func PodWaitingAnnotations(reason, message string) map[string]string {
	return map[string]string{
		"waiting.stage.raystep.dev/reason":  reason,
		"waiting.stage.raystep.dev/message": message,
		// Keep kwok's own stages from creating or readying the pod.
		"pod-create.stage.kwok.x-k8s.io/weight": "0",
		"pod-ready.stage.kwok.x-k8s.io/weight":  "0",
	}
}

// writeOwnStages writes raystep's kwok stages into dir and returns their
// paths.
func writeOwnStages(dir string) ([]string, error) {
	path := filepath.Join(dir, "raystep-pod-waiting.yaml")
	if err := os.WriteFile(path, podWaitingStage, 0o644); err != nil {
		return nil, fmt.Errorf("write kwok stage: %w", err)
	}
	return []string{path}, nil
}
