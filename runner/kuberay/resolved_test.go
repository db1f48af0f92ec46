package kuberay

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raystep/raystep/runner"
)

// TestProvisionReadsTheResolvedStep: the RayJob's name, namespace and
// Dagster labels are the resolved step's, whatever the spec says (its
// namespace is ml-ads), and Provision leaves the step as it was.
func TestProvisionReadsTheResolvedStep(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	step := request(2)
	step.ID, step.Namespace = "raystep-chosen-0123456789ab", "ml-search"
	step.RuntimeEnv = map[string]any{"pip": []any{"torch"}}
	before := step
	before.RuntimeEnv = maps.Clone(step.RuntimeEnv)
	before.Dagster.AssetKeys = slices.Clone(step.Dagster.AssetKeys)

	c := f.provision(t, step)
	job, err := f.ray.RayV1().RayJobs("ml-search").Get(t.Context(), step.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the RayJob is not %s/%s: %v", step.Namespace, step.ID, err)
	}
	got := []string{c.Name(), job.Labels[LabelRunID], job.Labels[LabelStep], job.Labels[LabelRetry], job.Labels[LabelAsset],
		job.Annotations[AnnotationStepKey], job.Annotations[AnnotationAssetKey]}
	want := []string{"ml-search/" + step.ID, LabelValue(step.RunID), step.Dagster.StepKey, strconv.Itoa(2),
		LabelValue("ads/ranking_model"), step.Dagster.StepKey, "ads/ranking_model"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cluster name, labels, annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, step); diff != "" {
		t.Errorf("Provision changed the step (-before +after):\n%s", diff)
	}
}

// TestBuildNeedsAResolvedStep: Build never makes up a name.
func TestBuildNeedsAResolvedStep(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	if job, err := Build(spec, profile, runner.Step{Name: spec.Metadata.Name}); err == nil {
		t.Fatalf("Build of an unresolved step named it %q", job.Name)
	}
}
