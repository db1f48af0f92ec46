package schemas

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSetCompletions: what a shell offers for --set as it is typed, one
// level of the spec at a time, and a field's allowed values after its
// "=".
func TestSetCompletions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typed string
		want  []string
	}{
		{"", []string{"apiVersion=", "kind=", "metadata.", "spec."}},
		{"spec.ti", []string{"spec.timeouts."}},
		{"spec.timeouts.", []string{"spec.timeouts.provision=", "spec.timeouts.queue=", "spec.timeouts.run=", "spec.timeouts.ttlAfterFinished="}},
		{"spec.cluster.workers.", []string{"spec.cluster.workers.0."}},
		{"spec.cluster.workers.0.gpu", []string{"spec.cluster.workers.0.gpuType=", "spec.cluster.workers.0.gpusPerWorker="}},
		{"spec.runtimeEnv.e", []string{"spec.runtimeEnv.env_vars.", "spec.runtimeEnv.excludes="}},
		{"spec.kind=", []string{"spec.kind=train", "spec.kind=eval", "spec.kind=batch_inference"}},
		{"spec.teardown=on", []string{"spec.teardown=on_success"}},
		{"spec.entrypoint=", nil},
		{"spec.nothing.", nil},
		{"spec.timeouts.run.deeper.", nil},
	} {
		got, err := SetCompletions(tc.typed)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, c := range got {
			texts = append(texts, c.Text)
		}
		if !cmp.Equal(texts, tc.want) {
			t.Errorf("SetCompletions(%q) = %q, want %q", tc.typed, texts, tc.want)
		}
	}
	got, _ := SetCompletions("spec.en")
	if want := "Shell command the Ray job runs, e.g. python train.py --epochs 3"; len(got) == 0 || got[0].Description != want {
		t.Errorf("spec.entrypoint's description: %+v, want %q (the schema's first sentence)", got, want)
	}
}
