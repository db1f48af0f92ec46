package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/test/raytest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var rayHead raytest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	rayHead.Stop()
	os.Exit(code)
}

// TestRayJobOnFakeGPUPool drives the real scheduler, kwok, garbage
// collector and KubeRay reconcilers through InteractiveMode RayJobs: placed
// on the right fake nodes, Waiting, followed to completion on a real Ray
// head, collected on delete; and a GPU type no node offers is really
// Unschedulable. Stop leaves no process behind.
//
// Starting a control plane is what this package is about, so its two
// tests start one each; the Ray head is the session's.
func TestRayJobOnFakeGPUPool(t *testing.T) {
	head := rayHead.Head(t)
	start := time.Now()
	c := New(t, Options{Nodes: gpuPool(), DashboardURL: head.DashboardURL(), Audit: true})
	t.Logf("environment ready in %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// The cases are independent, each in its own namespace, and mostly
	// wait on kwok's delays: run them side by side.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			run  func(context.Context, *testing.T, *Cluster)
		}{
			{"placed and Waiting, then collected", testPlacement},
			{"operator follows the job on the real head", func(ctx context.Context, t *testing.T, c *Cluster) {
				testFollow(ctx, t, c, head.DashboardURL())
			}},
			{"unknown GPU type is Unschedulable", testUnschedulable},
			{"head ImagePullBackOff", testImagePullBackOff},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.run(ctx, t, c)
			})
		}
	})

	// Every case created one RayJob; the audit log saw each create.
	if got := auditCount(t, c.AuditLogPath, "create", "rayjobs"); got != 4 {
		t.Errorf("audit log: %d RayJob creates, want 4", got)
	}

	stopCtx, stopCancel := context.WithTimeout(t.Context(), time.Minute)
	defer stopCancel()
	if err := c.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if left := childrenRunning(t, c.AssetsDir); len(left) > 0 {
		t.Errorf("processes left after Stop: %v", left)
	}
}

// testPlacement: the head lands on the CPU node, the GPU worker on the A100
// node, both Running with loopback IPs; the RayJob reaches Waiting; deleting
// it lets the garbage collector remove its RayCluster and pods.
func testPlacement(ctx context.Context, t *testing.T, c *Cluster) {
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
}

// testFollow: a job submitted to the real Ray head and named in spec.jobId
// is followed by the operator, through the head's dashboard, to SUCCEEDED;
// shutdownAfterJobFinishes then removes the RayCluster.
func testFollow(ctx context.Context, t *testing.T, c *Cluster, dashboardURL string) {
	job := rayJob(namespace(ctx, t, c, "follow"), "follow", "nvidia-a100-80gb")
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatalf("create RayJob: %v", err)
	}
	waitFor(ctx, t, "RayJob Waiting", func() (bool, string) {
		return deploymentStatus(ctx, c, job) == rayv1.JobDeploymentStatusWaiting, string(job.Status.JobDeploymentStatus)
	})
	ray, err := raysubmit.New(raysubmit.Config{BaseURL: dashboardURL})
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
}

// testUnschedulable: a worker asking for a GPU type no node offers stays
// Pending with the scheduler's own Unschedulable condition.
func testUnschedulable(ctx context.Context, t *testing.T, c *Cluster) {
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
}

// testImagePullBackOff: a head pod whose image cannot be pulled reports
// ImagePullBackOff and keeps the RayJob Initializing.
func testImagePullBackOff(ctx context.Context, t *testing.T, c *Cluster) {
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
}
