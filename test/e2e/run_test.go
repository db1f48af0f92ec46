package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/raysubmit"
)

// runID returns a Dagster run id no other test uses.
func runID(t *testing.T) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "e2e-" + hex.EncodeToString(b[:])
}

// TestRunTrainUnderPipes runs the train example on a running head (the
// session's: a private head's start and end are what TestSignalMatrix,
// TestRunSIGTERM and TestLocalUIListsARunningStep prove), bootstrapped as
// Dagster would, and checks the Pipes messages: the driver's logs and
// metrics, raystep's metadata, a clean close.
func TestRunTrainUnderPipes(t *testing.T) {
	env, messages := pipesEnv(t, pipes.ContextData{AssetKeys: []string{"ads_ranking_model"}, RunID: runID(t), Extras: map[string]any{}})
	env["RAY_ADDRESS"] = ray.Head(t).DashboardURL()
	model := filepath.Join(t.TempDir(), "model")
	env["RAYSTEP_UI_URL"] = "https://raystep.example.com/ml/?view=x"
	code, stdout, stderr := runRay(t, env, "run", "-f", train,
		"--set", "spec.runtimeEnv.env_vars.ADS_MODEL_DIR="+model,
		"--set", "spec.entrypoint=python train.py --epochs 2 --rows 20000 --seed 7")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	ms := readMessages(t, messages)
	got := methods(ms)
	if got[0] != "opened" || got[len(got)-1] != "closed" {
		t.Errorf("methods = %v, want opened first and closed last", got)
	}
	if exc := ms[len(ms)-1].Params["exception"]; exc != nil {
		t.Errorf("closed with exception %v", exc)
	}
	mats := only(ms, "report_asset_materialization")
	if len(mats) != 1 {
		t.Fatalf("%d materializations, want 1: %v", len(mats), got)
	}
	meta := mats[0].Params["metadata"].(map[string]any)
	want := map[string]string{
		"loss": "float", "auc": "float", "rows": "int", "epochs": "int",
		"raystep/dashboard_url": "url", "raystep/ray_job_id": "text", "raystep/submission_id": "text",
		"raystep/backend": "text", "raystep/duration_run_s": "float", "raystep/duration_total_s": "float",
		"raystep/history_url": "url",
	}
	gotTypes := map[string]string{}
	for key := range want {
		_, gotTypes[key] = metaValue(t, meta, key)
	}
	if diff := cmp.Diff(want, gotTypes); diff != "" {
		t.Errorf("metadata types (-want +got):\n%s", diff)
	}
	if v, _ := metaValue(t, meta, "raystep/backend"); v != "local" {
		t.Errorf("raystep/backend = %v, want local", v)
	}
	id, _ := metaValue(t, meta, "raystep/submission_id")
	if v, _ := metaValue(t, meta, "raystep/history_url"); v != fmt.Sprintf("https://raystep.example.com/ml/history/%s/", id) {
		t.Errorf("raystep/history_url = %v, want the step's page in the UI's History view", v)
	}
	if !strings.Contains(logText(ms), "epoch 2/2") {
		t.Errorf("the driver's log messages did not reach Dagster:\n%s", logText(ms))
	}
	if _, err := os.Stat(filepath.Join(model, "model.npz")); err != nil {
		t.Errorf("model not written: %v", err)
	}
	if strings.Contains(stdout, pipes.ProtocolVersion+`", "method"`) || strings.Contains(stdout, "__dagster_pipes_version") {
		t.Errorf("a Pipes message leaked to stdout:\n%s", stdout)
	}
	if stderr != "" {
		t.Errorf("stderr under Dagster = %q, want nothing", stderr)
	}
}

// logText joins the messages of the "log" messages.
func logText(ms []message) string {
	var b strings.Builder
	for _, m := range only(ms, "log") {
		b.WriteString(m.Params["message"].(string) + "\n")
	}
	return b.String()
}

// TestRunFailingEntrypoint submits an entrypoint that raises to a running
// head (RAY_ADDRESS as an http URL): exit 1 with Ray's message, said once.
func TestRunFailingEntrypoint(t *testing.T) {
	h := ray.Head(t)
	code, stdout, stderr := runRay(t, map[string]string{"RAY_ADDRESS": h.DashboardURL()}, "run", "-f", train,
		"--set", `spec.entrypoint=python -c "raise ValueError('driver-' + 'boom')"`)
	if code != exitJobFailed {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitJobFailed, stderr)
	}
	if !strings.Contains(stdout, "ValueError: driver-boom") {
		t.Errorf("stdout lacks the driver's traceback:\n%s", stdout)
	}
	failed := 0
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "FAILED") && strings.Contains(line, "driver-boom") {
			failed++
		}
	}
	if failed != 1 || strings.Contains(stderr, "raystep: ") {
		t.Errorf("want Ray's message once on stderr, without a second 'raystep:' line:\n%s", stderr)
	}
}

// TestRunInvalidSpecStartsNothing checks that a spec error exits 2 before
// ray is ever run, and that Dagster gets the error in the closed message,
// whether the bootstrap comes in the environment or as flags.
func TestRunInvalidSpecStartsNothing(t *testing.T) {
	for _, asFlags := range []bool{false, true} {
		t.Run(fmt.Sprintf("bootstrap as flags %v", asFlags), func(t *testing.T) {
			bin, invocations := rayWrapper(t)
			env, messages := pipesEnv(t, pipes.ContextData{AssetKeys: []string{"m"}, RunID: runID(t), Extras: map[string]any{}})
			args := []string{"run", "-f", train, "--set", "spec.timeouts.run=3 hours"}
			if asFlags {
				args = append(args, "--dagster-pipes-context", env[pipes.EnvContext], "--dagster-pipes-messages", env[pipes.EnvMessages])
				env = map[string]string{}
			}
			env["RAYSTEP_RAY_BIN"] = bin
			code, _, stderr := runRay(t, env, args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, "/spec/timeouts/run") {
				t.Errorf("stderr lacks the pointer of the error:\n%s", stderr)
			}
			if _, err := os.Stat(invocations); !os.IsNotExist(err) {
				t.Errorf("ray was run for an invalid spec (stat %s: %v)", invocations, err)
			}
			ms := readMessages(t, messages)
			if diff := cmp.Diff([]string{"opened", "log", "closed"}, methods(ms)); diff != "" {
				t.Fatalf("methods (-want +got):\n%s", diff)
			}
			exc, _ := ms[2].Params["exception"].(map[string]any)
			if exc["name"] != "InvalidSpec" || !strings.Contains(exc["message"].(string), "/spec/timeouts/run") {
				t.Errorf("closed exception = %v, want InvalidSpec naming /spec/timeouts/run", exc)
			}
		})
	}
}

// TestRunNoClusterAtAddress points RAY_ADDRESS at nothing: exit 3 at once,
// with the reason in the closed message.
func TestRunNoClusterAtAddress(t *testing.T) {
	env, messages := pipesEnv(t, pipes.ContextData{AssetKeys: []string{"m"}, RunID: runID(t), Extras: map[string]any{}})
	env["RAY_ADDRESS"] = "http://127.0.0.1:1"
	code, _, stderr := runRay(t, env, "run", "-f", train)
	if code != exitInfrastructure {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitInfrastructure, stderr)
	}
	ms := readMessages(t, messages)
	exc, _ := ms[len(ms)-1].Params["exception"].(map[string]any)
	if exc["name"] != "InfrastructureError" || !strings.Contains(exc["message"].(string), "does not answer") {
		t.Errorf("closed exception = %v, want InfrastructureError saying the dashboard does not answer", exc)
	}
	if n := strings.Count(stderr, "does not answer"); n != 1 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr says it %d times, want once and nothing else:\n%s", n, stderr)
	}
}

// TestRunAttachesOnRetry runs the same Dagster step twice on a running head
// (RAY_ADDRESS as a GCS address): the second run attaches to the job the
// first submitted instead of submitting it again.
func TestRunAttachesOnRetry(t *testing.T) {
	h := ray.Head(t)
	data := pipes.ContextData{AssetKeys: []string{"ads_ranking_model"}, RunID: runID(t), Extras: map[string]any{}}
	args := []string{"run", "-f", train, "--set", `spec.entrypoint=python -c "print('trained')"`}
	var attached []any
	for range 2 {
		env, messages := pipesEnv(t, data)
		env["RAY_ADDRESS"] = h.Address()
		code, stdout, stderr := runRay(t, env, args...)
		if code != 0 || !strings.Contains(stdout, "trained") {
			t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s", code, stderr, stdout)
		}
		mats := only(readMessages(t, messages), "report_asset_materialization")
		if len(mats) != 1 {
			t.Fatalf("%d materializations, want 1", len(mats))
		}
		v, _ := metaValue(t, mats[0].Params["metadata"].(map[string]any), "raystep/attached")
		attached = append(attached, v)
	}
	if diff := cmp.Diff([]any{false, true}, attached); diff != "" {
		t.Errorf("raystep/attached of the two runs (-want +got):\n%s", diff)
	}
	c, err := raysubmit.New(raysubmit.Config{BaseURL: h.DashboardURL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range jobs {
		if j.Metadata["raystep.dev/dagster-run"] == data.RunID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d Ray jobs for Dagster run %s, want 1", n, data.RunID)
	}
}
