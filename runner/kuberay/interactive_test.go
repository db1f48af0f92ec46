package kuberay

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
)

// TestBuildClusterIsAStepsCluster: an interactive RayCluster is the
// cluster a step's RayJob of the same spec gets (the same head, worker
// groups, GPU placement, pod security and service account from the
// profile), labelled interactive with its owner and expiry instead of a
// step's Dagster identity.
func TestBuildClusterIsAStepsCluster(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	job, err := Build(spec, profile, anonymous(spec))
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	rc, err := BuildCluster(spec, profile, "ml-dev", expires)
	if err != nil {
		t.Fatal(err)
	}
	want := job.Spec.RayClusterSpec.DeepCopy()
	want.AuthOptions.SecretName = ptr(AuthSecretName(rc.Name)) // the cluster's own token
	want.HeadGroupSpec.Template.Labels[LabelKind] = KindInteractive
	for i := range want.WorkerGroupSpecs {
		want.WorkerGroupSpecs[i].Template.Labels[LabelKind] = KindInteractive
	}
	if diff := cmp.Diff(want, &rc.Spec); diff != "" {
		t.Errorf("RayCluster spec, against the step's (-want +got):\n%s", diff)
	}
	meta := map[string]any{
		"name": rc.Name, "namespace": rc.Namespace, "owner": rc.Labels[LabelOwner], "kind": rc.Labels[LabelKind],
		"managed-by": rc.Labels[LabelManagedBy], "cost-center": rc.Labels["platform.example.com/cost-center"],
		"expires": rc.Annotations[AnnotationExpires], "gpus": rc.Annotations[AnnotationGPUs],
	}
	wantMeta := map[string]any{
		"name": "ads-ranking-train", "namespace": "ml-dev", "owner": "ads-ranking", "kind": "interactive",
		"managed-by": "raystep", "cost-center": "ml-ads", "expires": "2026-12-01T22:00:00Z", "gpus": "a100-80gb=2",
	}
	if diff := cmp.Diff(wantMeta, meta); diff != "" {
		t.Errorf("RayCluster metadata (-want +got):\n%s", diff)
	}
}

// TestBuildClusterTokenAuth: with the profile's token authentication the
// cluster reads its token from the Secret named after it, which is owned
// by the RayCluster.
func TestBuildClusterTokenAuth(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	profile.Spec.RayAuth.Mode = "token"
	rc, err := BuildCluster(spec, profile, "ml-dev", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rc.UID = "rc-uid"
	secret := authSecret(&rc.Spec, &rc.ObjectMeta, "RayCluster")
	if secret == nil || secret.Name != "ads-ranking-train-ray-auth" || *rc.Spec.AuthOptions.SecretName != secret.Name {
		t.Fatalf("token Secret %+v, authOptions %+v", secret, rc.Spec.AuthOptions)
	}
	want := []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: rc.Name, UID: "rc-uid"}}
	if diff := cmp.Diff(want, secret.OwnerReferences); diff != "" {
		t.Errorf("owner (-want +got):\n%s", diff)
	}
}

// TestUpExtendsOrRefuses: up on the name of a live interactive cluster
// moves its expiry and creates nothing; on a RayCluster that is not an
// interactive one (a step's, anyone's) or a name that does not exist, it
// is ErrNotInteractive and changes nothing.
func TestUpExtendsOrRefuses(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	build := func(ns string, expires time.Time) *rayv1.RayCluster {
		rc, err := BuildCluster(spec, profile, ns, expires)
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	t1, t2 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	live := build("live", t1)
	live.UID = "live-uid"
	step := build("step", t1)
	step.Labels[LabelKind] = "train"
	other := build("other", t1)
	other.Labels = nil
	f := newFakes(t, live, step, other)
	i := &Interactive{Kube: kubeapitest.Kube(f.kube), Ray: kubeapitest.Ray(f.ray)}

	up, err := i.Up(t.Context(), build("live", t2))
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ray.RayV1().RayClusters("live").Get(t.Context(), live.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{false, "2026-12-01T12:00:00Z", "2026-12-01T16:00:00Z", types.UID("live-uid")},
		[]any{up.Created, up.Previous, got.Annotations[AnnotationExpires], got.UID}); diff != "" {
		t.Errorf("created, previous, expiry, uid (-want +got):\n%s", diff)
	}
	for _, ns := range []string{"step", "other"} {
		if _, err := i.Up(t.Context(), build(ns, t2)); !errors.Is(err, ErrNotInteractive) {
			t.Errorf("up over the RayCluster in %s: %v, want ErrNotInteractive", ns, err)
		}
		rc, _ := f.ray.RayV1().RayClusters(ns).Get(t.Context(), live.Name, metav1.GetOptions{})
		if rc.Annotations[AnnotationExpires] != "2026-12-01T12:00:00Z" {
			t.Errorf("up changed the RayCluster in %s: %v", ns, rc.Annotations)
		}
	}
	if _, err := i.Find(t.Context(), "live", "nope"); !errors.Is(err, ErrNotInteractive) {
		t.Errorf("Find(nope) = %v, want ErrNotInteractive", err)
	}
}

// TestBorrowedRayJob: a step on an interactive cluster gets a RayJob that
// selects the cluster (spec.clusterSelector) and describes none of its
// own, is never suspended in a queue, and claims no GPUs of its own.
func TestBorrowedRayJob(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.Profile.Spec.Queue = "a100" // a queued step otherwise
	f.b.Cluster = "alice-dev"
	job, err := f.b.rayJob(attempt(f.b.Spec, identity))
	if err != nil {
		t.Fatal(err)
	}
	got := []any{job.Spec.ClusterSelector, job.Spec.RayClusterSpec == nil, job.Spec.Suspend, job.Labels[LabelQueueName],
		job.Annotations[AnnotationGPUs], job.Annotations[AnnotationCluster]}
	want := []any{map[string]string{"ray.io/cluster": "alice-dev"}, true, false, "", "", "alice-dev"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clusterSelector, no RayClusterSpec, suspend, queue, GPUs, cluster (-want +got):\n%s", diff)
	}
}
