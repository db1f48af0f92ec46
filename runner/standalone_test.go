package runner

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestRunStandalone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		golden   string
		fail     bool
		borrowed bool
	}{
		{"succeeded", "standalone_succeeded.txt", false, false},
		{"failed", "standalone_failed.txt", true, false},
		{"existing cluster left running", "standalone_borrowed.txt", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			var progress bytes.Buffer
			h.runner.Session = nil
			h.runner.Events = textSink(&progress)
			h.runner.NewRunID = func() string { return "standalone-0123456789abcdef" }
			h.backend.name = "local"
			h.cluster.name = "127.0.0.1:6379"
			h.cluster.borrowed = tt.borrowed
			h.step.Dagster = Dagster{}
			h.step.GPUType, h.step.GPUCount, h.step.Shape = "", 0, ""
			h.lines = []string{"loading data", pipesOpened, pipesLog,
				`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "ads-ranking-train", "data_version": null, "metadata": {"auc": {"raw_value": 0.81, "type": "float"}, "model_path": {"raw_value": "/tmp/m", "type": "path"}}}}`,
				`{"__dagster_pipes_version": "0.1", "method": "report_asset_check", "params": {"asset_key": "ads-ranking-train", "check_name": "auc_above_0_7", "passed": false, "severity": "WARN", "metadata": {"auc": {"raw_value": 0.65, "type": "float"}}}}`,
				`{"__dagster_pipes_version": "0.1", "method": "log_external_stream", "params": {"stream": "stdout", "text": "streamed\n", "extras": {}}}`,
				pipesCustom, pipesClosed}
			if tt.fail {
				exit1 := 1
				h.final = JobInfo{Status: StatusFailed, DriverExitCode: &exit1, Message: "Job entrypoint command failed with exit code 1"}
			}
			_, err := h.run()
			if (err != nil) != tt.fail {
				t.Fatalf("Run error %v, want failure %v", err, tt.fail)
			}
			checkGolden(t, tt.golden, progress.String())
			if diff := cmp.Diff("loading data\nstreamed\n", h.stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			boot := h.requests[0].RuntimeEnv["env_vars"].(map[string]any)[EnvPipesContext].(string)
			var got map[string]map[string]any
			if err := json.Unmarshal([]byte(boot[len("enc:"):]), &got); err != nil {
				t.Fatalf("decode bootstrap %s: %v", boot, err)
			}
			want := map[string]any{
				"asset_keys": []any{"ads-ranking-train"}, "code_version_by_asset_key": nil, "provenance_by_asset_key": nil,
				"partition_key": nil, "partition_key_range": nil, "partition_time_window": nil,
				"run_id": "standalone-0123456789abcdef", "job_name": nil, "retry_number": 0.0, "extras": map[string]any{},
			}
			if diff := cmp.Diff(want, got["data"]); diff != "" {
				t.Errorf("standalone pipes context (-want +got):\n%s", diff)
			}
		})
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
