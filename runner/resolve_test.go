package runner

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	made := func() string { return "standalone-0123456789abcdef" }
	tests := []struct {
		name string
		in   Step
		want Step
	}{
		{
			name: "standalone: a run id is made up, the step stands for an asset named after it",
			in:   Step{Name: "ads-ranking-train"},
			want: Step{Name: "ads-ranking-train", ID: StepID("ads-ranking-train", made(), "ads-ranking-train", 0), RunID: made(),
				Dagster: Dagster{StepKey: "ads-ranking-train", AssetKeys: []string{"ads-ranking-train"}}},
		},
		{
			name: "under dagster: dagster's run id, the asset keys as the step key",
			in: Step{Name: "train", Dagster: Dagster{RunID: "r-1", RetryNumber: 2, AssetKeys: []string{"ads/model", "ads/features"},
				Context: json.RawMessage(`{}`)}},
			want: Step{Name: "train", ID: StepID("train", "r-1", "ads/model,ads/features", 2), RunID: "r-1",
				Dagster: Dagster{RunID: "r-1", StepKey: "ads/model,ads/features", RetryNumber: 2,
					AssetKeys: []string{"ads/model", "ads/features"}, Context: json.RawMessage(`{}`)}},
		},
		{
			name: "an explicit step key wins",
			in:   Step{Name: "train", Dagster: Dagster{RunID: "r-1", StepKey: "model", AssetKeys: []string{"ads/model"}}},
			want: Step{Name: "train", ID: StepID("train", "r-1", "model", 0), RunID: "r-1",
				Dagster: Dagster{RunID: "r-1", StepKey: "model", AssetKeys: []string{"ads/model"}}},
		},
		{
			name: "a resolved step is left as it is",
			in:   Step{Name: "train", ID: "raystep-mine-000000000000", RunID: "r-9", Namespace: "ml-ads"},
			want: Step{Name: "train", ID: "raystep-mine-000000000000", RunID: "r-9", Namespace: "ml-ads"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Resolve(tt.in, made)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			if again := Resolve(got, func() string { return "another" }); !cmp.Equal(got, again) {
				t.Errorf("Resolve is not idempotent: %+v then %+v", got, again)
			}
		})
	}
}

// TestResolvedStepIsOnlyRead: the step the caller resolved reaches the
// backend as it is (even an ID Resolve would not have made), and that one
// ID is the cluster's, the submission id and the result's.
func TestResolvedStepIsOnlyRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step.RuntimeEnv = map[string]any{"env_vars": map[string]any{"A": "1"}}
	h.step.Namespace = "ml-ads"
	h.step = Resolve(h.step, nil)
	h.step.ID = "raystep-chosen-0123456789ab"
	want := h.step
	want.RuntimeEnv = map[string]any{"env_vars": map[string]any{"A": "1"}}
	var provisioned []Step
	h.backend.provision = func(ctx context.Context, step Step) (Cluster, error) {
		provisioned = append(provisioned, step)
		return h.cluster, nil
	}
	res, err := h.run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(provisioned) != 1 {
		t.Fatalf("Provision called %d times", len(provisioned))
	}
	if diff := cmp.Diff(want, provisioned[0]); diff != "" {
		t.Errorf("the step the backend got (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, h.step); diff != "" {
		t.Errorf("the caller's step after Run (-want +got):\n%s", diff)
	}
	got := []string{res.ID, h.requests[0].SubmissionID, h.requests[0].Metadata["raystep.dev/step-id"]}
	if diff := cmp.Diff([]string{want.ID, want.ID, want.ID}, got); diff != "" {
		t.Errorf("result id, submission id, job metadata (-want +got):\n%s", diff)
	}
}

// TestRunResolvesAnUnresolvedStep: a caller that hands Run a plain Step
// gets the identity Resolve gives it, the same as before Step carried one.
func TestRunResolvesAnUnresolvedStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var got Step
	h.backend.provision = func(ctx context.Context, step Step) (Cluster, error) {
		got = step
		return h.cluster, nil
	}
	res, err := h.run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	id := StepID("ads-ranking-train", testRunID, "ads/model", 0)
	if diff := cmp.Diff([]string{id, id, testRunID}, []string{got.ID, res.ID, got.RunID}); diff != "" {
		t.Errorf("step id, result id, run id (-want +got):\n%s", diff)
	}
}
