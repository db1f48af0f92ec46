package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/test/raytest"
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

// TestRayJobOnFakeGPUPool drives the real scheduler, kwok, garbage
// collector and KubeRay reconcilers through InteractiveMode RayJobs: placed
// on the right fake nodes, Waiting, followed to completion on a real Ray
// head, collected on delete; and a GPU type no node offers is really
// Unschedulable. Stop leaves no process behind.
func TestRayJobOnFakeGPUPool(t *testing.T) {
	head := raytest.StartHead(t, local.HeadOptions{NumCPUs: 1})
	start := time.Now()
	c := New(t, Options{Nodes: gpuPool(), DashboardURL: head.DashboardURL()})
	t.Logf("environment ready in %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// The cases are independent, each in its own namespace, and mostly
	// wait on kwok's delays: run them side by side.
	t.Run("cases", func(t *testing.T) {
		t.Run("placed and Waiting, then collected", func(t *testing.T) {
			t.Parallel()
			job := rayJob(namespace(ctx, t, c, "placement"), "a100", "nvidia-a100-80gb")
			created := time.Now()
			if err := c.Client.Create(ctx, job); err != nil {
				t.Fatalf("create RayJob: %v", err)
			}
			waitFor(ctx, t, "RayJob Waiting", func() (bool, string) {
				got := &rayv1.RayJob{}
				if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
					return false, err.Error()
				}
				*job = *got
				return got.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusWaiting, string(got.Status.JobDeploymentStatus)
			})
			t.Logf("RayJob reached Waiting %s after creation", time.Since(created).Round(time.Millisecond))

			pods := clusterPods(ctx, t, c, job)
			want := []placement{
				{Group: "headgroup", Node: "cpu-0", Phase: corev1.PodRunning, LoopbackIP: true},
				{Group: "gpu", Node: "gpu-a100-80gb-0", Phase: corev1.PodRunning, LoopbackIP: true},
			}
			if diff := cmp.Diff(want, placements(pods)); diff != "" {
				t.Errorf("pod placement (-want +got):\n%s", diff)
			}

			deleted := time.Now()
			if err := c.Client.Delete(ctx, job); err != nil {
				t.Fatalf("delete RayJob: %v", err)
			}
			waitFor(ctx, t, "RayCluster gone", func() (bool, string) {
				err := c.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Status.RayClusterName}, &rayv1.RayCluster{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			t.Logf("RayCluster gone %s after the RayJob's delete", time.Since(deleted).Round(time.Millisecond))
			waitFor(ctx, t, "RayJob, RayCluster and pods gone", func() (bool, string) {
				left := leftovers(ctx, c, job)
				return left == "", left
			})
			t.Logf("RayJob, RayCluster and pods gone %s after delete", time.Since(deleted).Round(time.Millisecond))
		})

		t.Run("operator follows the job on the real head", func(t *testing.T) {
			t.Parallel()
			job := rayJob(namespace(ctx, t, c, "follow"), "follow", "nvidia-a100-80gb")
			if err := c.Client.Create(ctx, job); err != nil {
				t.Fatalf("create RayJob: %v", err)
			}
			waitFor(ctx, t, "RayJob Waiting", func() (bool, string) {
				return deploymentStatus(ctx, c, job) == rayv1.JobDeploymentStatusWaiting, string(job.Status.JobDeploymentStatus)
			})
			ray, err := raysubmit.New(raysubmit.Config{BaseURL: head.DashboardURL()})
			if err != nil {
				t.Fatalf("dashboard client: %v", err)
			}
			id := "cluster-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			if _, err := ray.Submit(ctx, raysubmit.SubmitRequest{Entrypoint: "echo ok", SubmissionID: id}); err != nil {
				t.Fatalf("submit: %v", err)
			}
			patch := client.MergeFrom(job.DeepCopy())
			job.Spec.JobId = id
			if err := c.Client.Patch(ctx, job, patch); err != nil {
				t.Fatalf("set spec.jobId: %v", err)
			}
			waitFor(ctx, t, "RayJob Complete", func() (bool, string) {
				return deploymentStatus(ctx, c, job) == rayv1.JobDeploymentStatusComplete, string(job.Status.JobDeploymentStatus)
			})
			if got, want := job.Status.JobStatus, rayv1.JobStatusSucceeded; got != want {
				t.Errorf("jobStatus = %q, want %q (the Ray head's own status)", got, want)
			}
			// shutdownAfterJobFinishes: the operator deletes the RayCluster.
			waitFor(ctx, t, "RayCluster deleted by the operator", func() (bool, string) {
				err := c.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Status.RayClusterName}, &rayv1.RayCluster{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			if err := c.Client.Delete(ctx, job); err != nil {
				t.Fatalf("delete RayJob: %v", err)
			}
			waitFor(ctx, t, "RayJob, RayCluster and pods gone", func() (bool, string) {
				left := leftovers(ctx, c, job)
				return left == "", left
			})
		})

		t.Run("unknown GPU type is Unschedulable", func(t *testing.T) {
			t.Parallel()
			job := rayJob(namespace(ctx, t, c, "unschedulable"), "h100", "nvidia-h100-80gb")
			if err := c.Client.Create(ctx, job); err != nil {
				t.Fatalf("create RayJob: %v", err)
			}
			var cond corev1.PodCondition
			waitFor(ctx, t, "worker Unschedulable", func() (bool, string) {
				pods := &corev1.PodList{}
				err := c.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"ray.io/group": "gpu"})
				if err != nil {
					return false, err.Error()
				}
				for _, p := range pods.Items {
					for _, pc := range p.Status.Conditions {
						if pc.Type == corev1.PodScheduled && pc.Reason == corev1.PodReasonUnschedulable {
							cond = pc
							return p.Status.Phase == corev1.PodPending, string(p.Status.Phase)
						}
					}
				}
				return false, fmt.Sprintf("%d worker pods, none Unschedulable", len(pods.Items))
			})
			if !strings.Contains(cond.Message, "didn't match Pod's node affinity/selector") {
				t.Errorf("Unschedulable message = %q, want the scheduler's node selector mismatch", cond.Message)
			}
			got := &rayv1.RayJob{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
				t.Fatalf("get RayJob: %v", err)
			}
			if got.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing {
				t.Errorf("jobDeploymentStatus = %q, want %q while a worker cannot be placed", got.Status.JobDeploymentStatus, rayv1.JobDeploymentStatusInitializing)
			}
			if err := c.Client.Delete(ctx, job); err != nil {
				t.Fatalf("delete RayJob: %v", err)
			}
			waitFor(ctx, t, "RayJob, RayCluster and pods gone", func() (bool, string) {
				left := leftovers(ctx, c, job)
				return left == "", left
			})
		})

		t.Run("head ImagePullBackOff", func(t *testing.T) {
			t.Parallel()
			job := rayJob(namespace(ctx, t, c, "pullbackoff"), "nopull", "nvidia-a100-80gb")
			msg := `Back-off pulling image "rayproject/ray:does-not-exist"`
			job.Spec.RayClusterSpec.HeadGroupSpec.Template.Annotations = PodWaitingAnnotations("ImagePullBackOff", msg)
			if err := c.Client.Create(ctx, job); err != nil {
				t.Fatalf("create RayJob: %v", err)
			}
			var got corev1.ContainerStateWaiting
			waitFor(ctx, t, "head ImagePullBackOff", func() (bool, string) {
				pods := &corev1.PodList{}
				err := c.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"ray.io/node-type": "head"})
				if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) == 0 {
					return false, fmt.Sprintf("%v, %d head pods", err, len(pods.Items))
				}
				p := pods.Items[0]
				if w := p.Status.ContainerStatuses[0].State.Waiting; w != nil && p.Status.Phase == corev1.PodPending {
					got = *w
					return w.Reason == "ImagePullBackOff", w.Reason
				}
				return false, string(p.Status.Phase)
			})
			if diff := cmp.Diff(corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: msg}, got); diff != "" {
				t.Errorf("head container state (-want +got):\n%s", diff)
			}
			if st := deploymentStatus(ctx, c, job); st != rayv1.JobDeploymentStatusInitializing {
				t.Errorf("jobDeploymentStatus = %q, want %q while the head cannot start", st, rayv1.JobDeploymentStatusInitializing)
			}
			if err := c.Client.Delete(ctx, job); err != nil {
				t.Fatalf("delete RayJob: %v", err)
			}
			waitFor(ctx, t, "RayJob, RayCluster and pods gone", func() (bool, string) {
				left := leftovers(ctx, c, job)
				return left == "", left
			})
		})
	})

	stopCtx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if left := childrenRunning(t, c.AssetsDir); len(left) > 0 {
		t.Errorf("processes left after Stop: %v", left)
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
