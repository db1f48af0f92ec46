package kuberay

import (
	"context"
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A step on an interactive cluster (`raystep run --cluster NAME`): its
// RayJob names the RayCluster in spec.clusterSelector instead of carrying
// a RayClusterSpec. KubeRay then runs the job on that cluster and, when
// the RayJob ends or is deleted, stops the Ray job and never deletes the
// cluster (it skips its cluster cleanup in clusterSelector mode). The
// step still deletes its RayJob at teardown, and waits only for the
// RayJob to be gone: the borrowed cluster and its pods stay.

// clusterSelectorKey is the key of KubeRay's clusterSelector naming the
// RayCluster.
const clusterSelectorKey = "ray.io/cluster"

// AnnotationCluster names, on a step's RayJob, the interactive cluster it
// borrows.
const AnnotationCluster = "raystep.dev/cluster"

// borrow makes job run on the existing RayCluster named cluster: no
// cluster of its own, no queue (KubeRay refuses to suspend a RayJob in
// clusterSelector mode, and the cluster holds its GPUs already) and no
// GPU demand of its own for `raystep ls`.
func borrow(job *rayv1.RayJob, cluster string) {
	job.Spec.RayClusterSpec = nil
	job.Spec.ClusterSelector = map[string]string{clusterSelectorKey: cluster}
	job.Spec.Suspend = false
	delete(job.Labels, LabelQueueName)
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	delete(job.Annotations, AnnotationGPUs)
	job.Annotations[AnnotationCluster] = cluster
}

// ReadToken returns the Ray token of the token-authenticated cluster rc
// from the Secret raystep created for it, owned by rc (an interactive
// cluster's, made by up) or by the RayJob that owns rc (a step's); ""
// when rc has no token authentication.
func (i *Interactive) ReadToken(ctx context.Context, rc *rayv1.RayCluster) (string, error) {
	secret := authSecret(&rc.Spec, &rc.ObjectMeta, "RayCluster")
	if secret == nil {
		return "", nil
	}
	if b, err := i.kept(rc, KeptRayToken); err == nil && len(b) > 0 {
		return string(b), nil // up made it on this machine
	}
	s, err := i.Kube.CoreV1().Secrets(rc.Namespace).Get(ctx, secret.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the Ray token of RayCluster %s/%s from Secret %s: %w (or set RAYSTEP_DASHBOARD_TOKEN)",
			rc.Namespace, rc.Name, secret.Name, err)
	}
	owners := map[string]bool{"RayCluster/" + string(rc.UID): true}
	for _, o := range rc.OwnerReferences {
		if o.Kind == "RayJob" {
			owners["RayJob/"+string(o.UID)] = true
		}
	}
	owned := false
	for _, o := range s.OwnerReferences {
		owned = owned || owners[o.Kind+"/"+string(o.UID)]
	}
	token := string(s.Data[AuthTokenKey])
	switch {
	case !owned:
		return "", fmt.Errorf("Secret %s/%s is not owned by RayCluster %s: raystep does not read its token", rc.Namespace, secret.Name, rc.Name)
	case token == "":
		return "", fmt.Errorf("Secret %s/%s has no %s", rc.Namespace, secret.Name, AuthTokenKey)
	}
	return token, nil
}
