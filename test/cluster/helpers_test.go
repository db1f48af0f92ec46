package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	acceleratorLabel = "cloud.google.com/gke-accelerator"
	gpuResource      = corev1.ResourceName("nvidia.com/gpu")
	waitTimeout      = 2 * time.Minute
)

// gpuPool mirrors a platform profile with one A100 pool and a CPU node.
func gpuPool() []NodeSpec {
	return []NodeSpec{
		{
			Name:   "gpu-a100-80gb-0",
			Labels: map[string]string{acceleratorLabel: "nvidia-a100-80gb"},
			Taints: []corev1.Taint{{Key: string(gpuResource), Value: "present", Effect: corev1.TaintEffectNoSchedule}},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("96"),
				corev1.ResourceMemory: resource.MustParse("1360Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
				gpuResource:           resource.MustParse("8"),
			},
		},
		{
			Name: "cpu-0",
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("32"),
				corev1.ResourceMemory: resource.MustParse("128Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
		},
	}
}

// namespace creates a namespace for one case.
func namespace(ctx context.Context, t *testing.T, c *Cluster, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return name
}

// deploymentStatus refreshes job and returns its deployment status.
func deploymentStatus(ctx context.Context, c *Cluster, job *rayv1.RayJob) rayv1.JobDeploymentStatus {
	got := &rayv1.RayJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err == nil {
		*job = *got
	}
	return job.Status.JobDeploymentStatus
}

// childrenRunning lists this process's children that run a binary from
// the assets directory.
func childrenRunning(t *testing.T, assets string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// Fields after the parenthesised command: state, ppid, ...
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) || fields[0] == "Z" {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if strings.HasPrefix(exe, assets) {
			out = append(out, fmt.Sprintf("%d %s", pid, exe))
		}
	}
	return out
}

// rayJob builds an InteractiveMode RayJob with a CPU head and one worker
// asking for one GPU of the given accelerator type.
func rayJob(ns, name, accelerator string) *rayv1.RayJob {
	container := func(name string, res corev1.ResourceList) []corev1.Container {
		return []corev1.Container{{
			Name:      name,
			Image:     "rayproject/ray:2.60.0-py311",
			Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
		}}
	}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	gpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"), gpuResource: resource.MustParse("1")}
	return &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: rayv1.RayJobSpec{
			SubmissionMode:           rayv1.InteractiveMode,
			ShutdownAfterJobFinishes: true,
			RayClusterSpec: &rayv1.RayClusterSpec{
				RayVersion: "2.60.0",
				HeadGroupSpec: rayv1.HeadGroupSpec{
					RayStartParams: map[string]string{},
					Template:       corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: container("ray-head", cpu)}},
				},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
					GroupName:      "gpu",
					Replicas:       ptr.To[int32](1),
					MinReplicas:    ptr.To[int32](1),
					MaxReplicas:    ptr.To[int32](1),
					RayStartParams: map[string]string{},
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						Containers:   container("ray-worker", gpu),
						NodeSelector: map[string]string{acceleratorLabel: accelerator},
						Tolerations:  []corev1.Toleration{{Key: string(gpuResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					}},
				}},
			},
		},
	}
}

// placement is what the test checks of one Ray pod.
type placement struct {
	Group      string
	Node       string
	Phase      corev1.PodPhase
	LoopbackIP bool
}

func placements(pods []corev1.Pod) []placement {
	var out []placement
	for _, p := range pods {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		out = append(out, placement{
			Group:      p.Labels["ray.io/group"],
			Node:       p.Spec.NodeName,
			Phase:      p.Status.Phase,
			LoopbackIP: err == nil && netip.MustParsePrefix("127.1.0.0/16").Contains(ip),
		})
	}
	return out
}

// clusterPods returns the RayCluster's pods, head first.
func clusterPods(ctx context.Context, t *testing.T, c *Cluster, job *rayv1.RayJob) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	sel := client.MatchingLabels{"ray.io/cluster": job.Status.RayClusterName}
	if err := c.Client.List(ctx, pods, client.InNamespace(job.Namespace), sel); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	out := pods.Items
	for i, p := range out {
		if p.Labels["ray.io/node-type"] == "head" && i > 0 {
			out[0], out[i] = out[i], out[0]
		}
	}
	return out
}

// leftovers names what remains of a RayJob: itself, its RayCluster, pods.
func leftovers(ctx context.Context, c *Cluster, job *rayv1.RayJob) string {
	var left []string
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), &rayv1.RayJob{}); !apierrors.IsNotFound(err) {
		left = append(left, "RayJob")
	}
	clusters := &rayv1.RayClusterList{}
	if err := c.Client.List(ctx, clusters, client.InNamespace(job.Namespace)); err != nil || len(clusters.Items) > 0 {
		left = append(left, fmt.Sprintf("%d RayClusters", len(clusters.Items)))
	}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(job.Namespace)); err != nil || len(pods.Items) > 0 {
		left = append(left, fmt.Sprintf("%d pods", len(pods.Items)))
	}
	return strings.Join(left, ", ")
}

// auditCount counts the audit events at ResponseComplete with the verb
// and resource.
func auditCount(t *testing.T, path, verb, resource string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			ObjectRef struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if ev.Stage == "ResponseComplete" && ev.Verb == verb && ev.ObjectRef.Resource == resource {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing the test with cond's last
// state when waitTimeout passes or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("wait for %s: %v (last: %s)", what, context.Cause(ctx), state)
		case <-tick.C:
		}
	}
}
