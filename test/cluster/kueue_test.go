package cluster

import (
	"fmt"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/schemas"
)

// TestKueueAdmitsProfileQueue starts the real Kueue manager with the
// queues ProfileQueues makes for a one-pool profile that also names a
// queue for all steps (the API server checks them against Kueue's CRDs,
// and Kueue reports every ClusterQueue active): a suspended RayJob
// labelled with the pool's LocalQueue gets a Workload that Kueue admits,
// it is unsuspended with the pool's node selector, and KubeRay brings its
// cluster up to Waiting.
func TestKueueAdmitsProfileQueue(t *testing.T) {
	profile := &schemas.Profile{Spec: schemas.ProfileSpec{Queue: "shared", GPUTypes: map[string]schemas.GPUType{
		"a100-80gb": {ResourceName: string(gpuResource), NodeSelector: map[string]string{acceleratorLabel: "nvidia-a100-80gb"}, Queue: "a100"},
	}}}
	start := time.Now()
	c := New(t, Options{Nodes: ProfileNodes(profile), Kueue: true, KwokStages: FastStages()})
	t.Logf("environment with Kueue ready in %s", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()
	ns := namespace(ctx, t, c, "queued")
	if err := c.CreateKueueObjects(ctx, ProfileQueues(profile, ns)); err != nil {
		t.Fatal(err)
	}
	for _, cq := range []string{"gpu-a100-80gb", "all"} {
		waitFor(ctx, t, "ClusterQueue "+cq+" active", func() (bool, string) {
			u := KueueObject("ClusterQueue", "", cq, nil)
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				return false, err.Error()
			}
			return condition(*u, "Active"), fmt.Sprint(u.Object["status"])
		})
	}
	job := rayJob(ns, "queued", "nvidia-a100-80gb")
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "a100"}
	job.Spec.Suspend = true
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatalf("create RayJob: %v", err)
	}
	waitFor(ctx, t, "RayJob admitted and Waiting", func() (bool, string) {
		st := deploymentStatus(ctx, c, job)
		return !job.Spec.Suspend && st == rayv1.JobDeploymentStatusWaiting, string(st)
	})
	workloads := &unstructured.UnstructuredList{}
	workloads.SetAPIVersion(KueueAPIVersion)
	workloads.SetKind("WorkloadList")
	if err := c.Client.List(ctx, workloads, client.InNamespace(ns)); err != nil {
		t.Fatalf("list workloads: %v", err)
	}
	if len(workloads.Items) != 1 || !condition(workloads.Items[0], "Admitted") {
		t.Fatalf("workloads: %+v, want one admitted", workloads.Items)
	}
	if err := c.Client.Delete(ctx, job, client.PropagationPolicy("Foreground")); err != nil {
		t.Fatalf("delete RayJob: %v", err)
	}
	waitFor(ctx, t, "RayJob and Workload gone", func() (bool, string) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), &rayv1.RayJob{})
		left := &unstructured.UnstructuredList{}
		left.SetAPIVersion(KueueAPIVersion)
		left.SetKind("WorkloadList")
		_ = c.Client.List(ctx, left, client.InNamespace(ns))
		return err != nil && len(left.Items) == 0, leftovers(ctx, c, job)
	})
}

// condition reports whether a Kueue object's condition of type is True.
func condition(obj unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == string(corev1.ConditionTrue) {
			return true
		}
	}
	return false
}
