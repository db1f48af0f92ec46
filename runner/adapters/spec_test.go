package adapters

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

func TestStepFromSpec(t *testing.T) {
	t.Parallel()
	spec, err := schemas.Load("../../examples/ads_ranking/train.yaml", schemas.LoadOptions{Set: []string{"spec.entrypointResources.memory=1Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs("../../examples/ads_ranking")
	if err != nil {
		t.Fatal(err)
	}
	standalone := runner.Step{
		Name: "ads-ranking-train", Owner: "ads-ranking", Kind: "train", Entrypoint: "python train.py --epochs 3 --seed 7", WorkingDir: dir,
		RuntimeEnv:       map[string]any{"env_vars": map[string]any{"ADS_MODEL_DIR": "/tmp/raystep-examples/ads_ranking/model"}},
		Resources:        runner.Resources{CPUs: 1, Memory: 1 << 30},
		ProvisionTimeout: 15 * time.Minute, RunTimeout: 6 * time.Hour, Teardown: runner.TeardownAlways,
		GPUType: "a100-80gb", GPUCount: 2, Shape: "head 2 CPU 4Gi; gpu 2x(8 CPU 32Gi 1 a100-80gb)",
	}
	data := pipes.ContextData{AssetKeys: []string{"ads_ranking_model"}, RunID: "r-1", RetryNumber: 2, Extras: map[string]any{}}
	env, err := pipes.BootstrapEnv(pipes.ContextDataParams(data), pipes.FileMessagesParams(filepath.Join(t.TempDir(), "messages")))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := pipes.Open(pipes.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(nil)
	dagster := standalone
	dagster.Dagster = runner.Dagster{RunID: "r-1", RetryNumber: 2, AssetKeys: []string{"ads_ranking_model"}}
	inactive, err := pipes.Open(pipes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		sess *pipes.Session
		want runner.Step
	}{
		{name: "standalone", sess: inactive, want: standalone},
		{name: "under dagster", sess: sess, want: dagster},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StepFromSpec(spec, tt.sess)
			if err != nil {
				t.Fatal(err)
			}
			if tt.sess.Active() && len(got.Dagster.Context) == 0 {
				t.Error("the Pipes context is not passed on to the driver")
			}
			got.Dagster.Context = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StepFromSpec (-want +got):\n%s", diff)
			}
		})
	}
}
