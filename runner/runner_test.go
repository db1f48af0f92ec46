package runner

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	pipesOpened = `{"__dagster_pipes_version": "0.1", "method": "opened", "params": {"extras": {}}}`
	pipesLog    = `{"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": "epoch 1 loss=0.52", "level": "INFO"}}`
	pipesMat    = `{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "ads/model", "data_version": "v7", "metadata": {"auc": {"raw_value": 0.81, "type": "float"}}}}`
	pipesCheck  = `{"__dagster_pipes_version": "0.1", "method": "report_asset_check", "params": {"asset_key": "ads/model", "check_name": "auc_above", "passed": true, "severity": "ERROR", "metadata": {}}}`
	pipesCustom = `{"__dagster_pipes_version": "0.1", "method": "report_custom_message", "params": {"payload": {"rows": 1000}}}`
	pipesClosed = `{"__dagster_pipes_version": "0.1", "method": "closed", "params": {}}`
)

func TestRunSuccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step.WorkingDir = "/src/ads"
	h.lines = []string{"starting", pipesOpened, pipesLog, pipesMat, "  plain {json} line", pipesCheck, pipesCustom, pipesClosed, "bye"}

	res, err := h.run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	id := StepID("ads-ranking-train", testRunID, "ads/model", 0)
	wantCalls := []string{
		"provision " + id, "ready", "dashboard", "connect http://127.0.0.1:38265",
		"upload gcs://_ray_pkg_0123abcd.zip", "submit " + id, "set job id " + id, "tail " + id, "teardown keep=false",
	}
	if diff := cmp.Diff(wantCalls, h.calls.list()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("starting\n  plain {json} line\nbye\n", h.stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	wantMeta := wantSuccessMetadata(id)
	msgs := h.driverMessages()
	wantMethods := []string{
		"log " + `{"message": "epoch 1 loss=0.52", "level": "INFO"}`,
		"report_asset_check " + `{"asset_key": "ads/model", "check_name": "auc_above", "passed": true, "severity": "ERROR", "metadata": {}}`,
		"report_custom_message " + `{"payload": {"rows": 1000}}`,
	}
	if len(msgs) != 4 {
		t.Fatalf("driver messages: got %d, want 4:\n%v", len(msgs), msgs)
	}
	if diff := cmp.Diff(wantMethods, msgs[:3]); diff != "" {
		t.Errorf("forwarded messages (-want +got):\n%s", diff)
	}
	mat := decodeMaterialization(t, msgs[3])
	if diff := cmp.Diff("ads/model", mat.AssetKey); diff != "" {
		t.Errorf("asset key (-want +got):\n%s", diff)
	}
	if mat.DataVersion == nil || *mat.DataVersion != "v7" {
		t.Errorf("data version = %v, want v7", mat.DataVersion)
	}
	if diff := cmp.Diff(wantMeta, mat.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	for _, key := range []string{"raystep/gpu_hours", "raystep/duration_total_s"} {
		if !json.Valid(mat.raw[key]) || string(mat.raw[key]) == "" || !containsDot(mat.raw[key]) {
			t.Errorf("%s = %s, want a float with a decimal point", key, mat.raw[key])
		}
	}
	if exc := h.closedWith(); exc != nil {
		t.Errorf("closed with %+v, want no exception", exc)
	}
	want := Result{
		ID: id, Cluster: "ml-ads/raystep-train", DashboardURL: "https://ray.example.com/train", Job: h.final,
		Durations: map[Phase]time.Duration{
			PhaseProvision: 30 * one, PhaseDashboard: one, PhaseUpload: 2 * one, PhaseSubmit: one,
			PhaseRun: time.Hour, PhaseTeardown: 5 * one,
		},
		JobTime: time.Hour,
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestRunSubmitsRuntimeEnvWithBootstrap(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step.WorkingDir = "/src/ads"
	spec := map[string]any{"pip": []any{"numpy"}, "env_vars": map[string]any{"SEED": "7", EnvPipesContext: "spoofed"}}
	h.step.RuntimeEnv = spec
	h.step.Resources = Resources{CPUs: 1, GPUs: 0.5, Memory: 2 << 30, Custom: map[string]float64{"accel": 1}}
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	id := StepID("ads-ranking-train", testRunID, "ads/model", 0)
	want := []JobRequest{{
		SubmissionID: id,
		Entrypoint:   "python train.py",
		RuntimeEnv: map[string]any{
			"pip":         []any{"numpy"},
			"working_dir": "gcs://_ray_pkg_0123abcd.zip",
			"env_vars": map[string]any{
				"SEED":           "7",
				EnvPipesContext:  `enc:{"data":{"run_id":"` + testRunID + `"}}`,
				EnvPipesMessages: `enc:{"stdio":"stdout"}`,
			},
		},
		Metadata: map[string]string{
			"raystep.dev/step-id": id, "raystep.dev/spec": "ads-ranking-train", "raystep.dev/kind": "train",
			"raystep.dev/dagster-run": testRunID, "raystep.dev/dagster-step": "ads/model", "raystep.dev/retry": "0",
		},
		Resources: Resources{CPUs: 1, GPUs: 0.5, Memory: 2 << 30, Custom: map[string]float64{"accel": 1}},
	}}
	if diff := cmp.Diff(want, h.requests); diff != "" {
		t.Errorf("submitted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"SEED": "7", EnvPipesContext: "spoofed"}, spec["env_vars"]); diff != "" {
		t.Errorf("the caller's runtime env changed (-want +got):\n%s", diff)
	}
}

// wantSuccessMetadata is the driver's metadata merged with raystep's for
// the harness's successful step.
func wantSuccessMetadata(id string) map[string]any {
	return map[string]any{
		"auc":                          map[string]any{"raw_value": 0.81, "type": "float"},
		"raystep/submission_id":        text2(id),
		"raystep/ray_job_id":           text2("02000000"),
		"raystep/dashboard_url":        map[string]any{"raw_value": "https://ray.example.com/train", "type": "url"},
		"raystep/backend":              text2("kuberay"),
		"raystep/cluster":              text2("ml-ads/raystep-train"),
		"raystep/cluster_shape":        text2("head + 4x gpu"),
		"raystep/spec":                 text2("ads-ranking-train"),
		"raystep/kind":                 text2("train"),
		"raystep/status":               text2("SUCCEEDED"),
		"raystep/attached":             map[string]any{"raw_value": false, "type": "bool"},
		"raystep/gpu_type":             text2("a100-80gb"),
		"raystep/gpu_count":            map[string]any{"raw_value": 4.0, "type": "int"},
		"raystep/gpu_hours":            float2(4),
		"raystep/duration_provision_s": float2(30),
		"raystep/duration_dashboard_s": float2(1),
		"raystep/duration_upload_s":    float2(2),
		"raystep/duration_submit_s":    float2(1),
		"raystep/duration_run_s":       float2(3600),
		"raystep/duration_teardown_s":  float2(5),
		"raystep/duration_total_s":     float2(3639),
	}
}

type decodedMat struct {
	AssetKey    string
	DataVersion *string
	Metadata    map[string]any
	raw         map[string]json.RawMessage
}

func decodeMaterialization(t *testing.T, msg string) decodedMat {
	t.Helper()
	const prefix = "report_asset_materialization "
	if len(msg) < len(prefix) || msg[:len(prefix)] != prefix {
		t.Fatalf("not a materialization: %s", msg)
	}
	var p struct {
		AssetKey    string                     `json:"asset_key"`
		DataVersion *string                    `json:"data_version"`
		Metadata    map[string]any             `json:"metadata"`
		Raw         map[string]json.RawMessage `json:"-"`
	}
	body := []byte(msg[len(prefix):])
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var raw struct {
		Metadata map[string]struct {
			RawValue json.RawMessage `json:"raw_value"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &raw)
	d := decodedMat{AssetKey: p.AssetKey, DataVersion: p.DataVersion, Metadata: p.Metadata, raw: map[string]json.RawMessage{}}
	for k, v := range raw.Metadata {
		d.raw[k] = v.RawValue
	}
	return d
}

func text2(s string) map[string]any   { return map[string]any{"raw_value": s, "type": "text"} }
func float2(f float64) map[string]any { return map[string]any{"raw_value": f, "type": "float"} }
func containsDot(b json.RawMessage) bool {
	for _, c := range b {
		if c == '.' {
			return true
		}
	}
	return false
}
