package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sethvargo/go-envconfig"
	"go.uber.org/zap"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/schemas"
)

// privateHeadNotice is what a user whose spec keeps clusters is told when
// the step runs on a private local head.
const privateHeadNotice = `teardown "never" keeps nothing with a private local head: the head belongs to this step ` +
	"and stops with it; set RAY_ADDRESS to run on a cluster that outlives the step"

// testApp is an app over env (nothing from the process), with a kubeconfig
// whose context's namespace is kube-ns and whose server is never called.
func testApp(t *testing.T, env map[string]string) *app {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: kube-ns}}]
current-context: x
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	full := map[string]string{"KUBECONFIG": kubeconfig, "HOME": t.TempDir()}
	for k, v := range env {
		full[k] = v
	}
	a := &app{lookup: envconfig.MapLookuper(full), log: zap.NewNop()}
	if a.cfg, err = loadConfig(t.Context(), a.lookup); err != nil {
		t.Fatal(err)
	}
	return a
}

// resolveFor places train.yaml (with set) as run does, on backend with
// --namespace namespace.
func resolveFor(t *testing.T, a *app, backend, namespace, profileNS string, set ...string) (runner.Step, runner.Backend, []string) {
	t.Helper()
	profile, err := schemas.LoadProfile(platform)
	if err != nil {
		t.Fatal(err)
	}
	profile.Spec.Namespace = profileNS
	spec, err := schemas.Load(train, schemas.LoadOptions{Profile: profile, Set: set})
	if err != nil {
		t.Fatal(err)
	}
	inactive, err := pipes.Open(pipes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	step, err := adapters.StepFromSpec(spec, inactive)
	if err != nil {
		t.Fatal(err)
	}
	cmd := a.runCommand()
	for name, value := range map[string]string{"backend": backend, "namespace": namespace} {
		if err := cmd.Flags().Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	s, err := a.site(cmd, "run")
	if err != nil {
		t.Fatal(err)
	}
	resolved, b, err := s.Place(t.Context(), step, fleet.Placement{Spec: spec, Profile: profile})
	if err != nil {
		t.Fatalf("Place: %v", err)
	}
	return resolved, b, resolved.Notices
}

// TestRunNamespace: run --backend kuberay places the step by one
// precedence: --namespace, $RAYSTEP_NAMESPACE, the spec's, the profile's,
// the kubeconfig context's.
func TestRunNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, flag, env, profile string
		set                      []string
		want                     string
	}{
		{name: "flag", flag: "flag-ns", env: "env-ns", profile: "ml-ads", set: []string{"metadata.namespace=spec-ns"}, want: "flag-ns"},
		{name: "environment", env: "env-ns", profile: "ml-ads", set: []string{"metadata.namespace=spec-ns"}, want: "env-ns"},
		{name: "spec", profile: "ml-ads", set: []string{"metadata.namespace=spec-ns"}, want: "spec-ns"},
		{name: "profile", profile: "ml-ads", want: "ml-ads"},
		{name: "kubeconfig", want: "kube-ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if tt.env != "" {
				env["RAYSTEP_NAMESPACE"] = tt.env
			}
			step, _, _ := resolveFor(t, testApp(t, env), "kuberay", tt.flag, tt.profile, tt.set...)
			if step.Namespace != tt.want {
				t.Errorf("namespace %q, want %q", step.Namespace, tt.want)
			}
			if want := runner.Resolve(step, nil); step.ID == "" || !cmp.Equal(want, step) {
				t.Errorf("the step is not resolved: %+v", step)
			}
		})
	}
}

// TestLocalBackendResolvesTheStep: on the local backend the step reports
// the machine, not the spec's GPUs, and a private head forces teardown
// always, saying so once; an existing cluster keeps the spec's policy.
func TestLocalBackendResolvesTheStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		env         map[string]string
		teardown    string
		wantShape   string
		wantPolicy  runner.TeardownPolicy
		wantNotices []string
	}{
		{name: "private head keeps nothing", teardown: "never", wantShape: "private ray head on this machine",
			wantPolicy: runner.TeardownAlways, wantNotices: []string{privateHeadNotice}},
		{name: "private head, always", teardown: "always", wantShape: "private ray head on this machine",
			wantPolicy: runner.TeardownAlways},
		{name: "existing cluster keeps its policy", env: map[string]string{"RAY_ADDRESS": "http://127.0.0.1:1", "RAY_AUTH_TOKEN": "x"},
			teardown: "never", wantShape: "existing ray cluster", wantPolicy: runner.TeardownNever},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, b, notices := resolveFor(t, testApp(t, tt.env), "local", "", "ml-ads", "spec.teardown="+tt.teardown)
			got := []any{step.Shape, step.Teardown, step.GPUType, step.GPUCount, step.Namespace, notices}
			want := []any{tt.wantShape, tt.wantPolicy, "", 0, "", tt.wantNotices}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("shape, teardown, GPU type and count, namespace, notices (-want +got):\n%s", diff)
			}
			if _, ok := b.(*local.Backend); !ok || step.ID == "" {
				t.Errorf("backend %T, step id %q: want a local backend and a resolved step", b, step.ID)
			}
		})
	}
}

// TestRenderUsesTheNamespacePrecedence: render places the RayJob as run
// does (the environment over the spec's namespace).
func TestRenderUsesTheNamespacePrecedence(t *testing.T) {
	t.Parallel()
	code, out, errOut := runTest(t, map[string]string{"RAYSTEP_NAMESPACE": "env-ns"}, "render", "-f", train,
		"--profile", platform, "--set", "metadata.namespace=spec-ns", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var job struct {
		Metadata struct{ Namespace string } `json:"metadata"`
	}
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&job); err != nil {
		t.Fatalf("render output is not JSON: %v\n%s", err, out)
	}
	if job.Metadata.Namespace != "env-ns" {
		t.Errorf("namespace %q, want env-ns", job.Metadata.Namespace)
	}
}

// TestWithoutAProfileTheKubeconfigPlaces: with no profile of the user's,
// the kubeconfig context's namespace places and finds raystep's clusters,
// as for kubectl, in render, run, ls and gc alike; a profile someone
// passes, the flag and $RAYSTEP_NAMESPACE come before it. The API server
// here refuses every connection, so what each command says names the
// namespace it would have used.
func TestWithoutAProfileTheKubeconfigPlaces(t *testing.T) {
	t.Parallel()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
current-context: plain
clusters:
- {name: refused, cluster: {server: "https://127.0.0.1:1"}}
users:
- {name: u, user: {token: not-a-secret}}
contexts:
- {name: plain, context: {cluster: refused, user: u}}
- {name: team, context: {cluster: refused, user: u, namespace: team-b}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBECONFIG": kubeconfig, "HOME": t.TempDir()}
	rendered := func(env map[string]string, args ...string) string {
		t.Helper()
		code, out, errOut := runTest(t, env, append([]string{"render", "-f", eval, "-o", "json"}, args...)...)
		var job struct {
			Metadata struct{ Namespace string } `json:"metadata"`
		}
		// The RayJob, then the Secret of its token.
		if code != 0 || json.NewDecoder(strings.NewReader(out)).Decode(&job) != nil {
			t.Fatalf("render %v: exit %d: %s%s", args, code, out, errOut)
		}
		return job.Metadata.Namespace
	}
	withEnv := map[string]string{"KUBECONFIG": kubeconfig, "HOME": env["HOME"], "RAYSTEP_NAMESPACE": "env-ns"}
	got := []string{
		rendered(env, "--context", "team"),
		rendered(env),
		rendered(env, "--context", "team", "--profile", platform),
		rendered(env, "--context", "team", "--namespace", "flag-ns"),
		rendered(withEnv, "--context", "team"),
	}
	want := []string{"team-b", "default", "ml-ads", "flag-ns", "env-ns"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("render's namespace: the context's, none, a profile, the flag, $RAYSTEP_NAMESPACE (-want +got):\n%s", diff)
	}

	for _, args := range [][]string{
		{"ls", "--context", "team"},
		{"gc", "--dry-run", "--context", "team"},
		{"run", "--backend", "kuberay", "-f", eval, "--context", "team"},
	} {
		code, _, errOut := runTest(t, env, args...)
		if code != exitInfrastructure || !strings.Contains(errOut, "team-b") ||
			strings.Contains(errOut, "namespaces/default/") || strings.Contains(errOut, "namespace default") {
			t.Errorf("%v against a refused API server: exit %d, want 3 and namespace team-b named:\n%s", args, code, errOut)
		}
	}
	// render, which needs the kubeconfig here, reads it as run would.
	code, out, errOut := runTest(t, env, "render", "-f", eval, "--context", "nope")
	if code != exitInfrastructure || out != "" || !strings.Contains(errOut, `context "nope" does not exist`) {
		t.Errorf("render with an unknown context: exit %d, %q; want 3 and the kubeconfig's problem:\n%s", code, out, errOut)
	}
	code, _, errOut = runTest(t, env, "ls", "--context", "team", "--profile", platform)
	if code != exitInfrastructure || !strings.Contains(errOut, "in namespace ml-ads") {
		t.Errorf("ls with a profile: exit %d, want 3 and namespace ml-ads named:\n%s", code, errOut)
	}
}

// TestRenderNamesTheRayJobRunWould: given a run id and an asset key but no
// step key, render shows the RayJob name that run under Dagster creates
// for that asset (its step key is the asset keys), not another attempt's.
func TestRenderNamesTheRayJobRunWould(t *testing.T) {
	t.Parallel()
	const runID, asset = "3f2a9c1b-7d0e-4c55-9a51-0e2f6b8f4c11", "ads/ranking_model"
	code, out, errOut := runTest(t, nil, "render", "-f", train, "--profile", platform,
		"--dagster-run-id", runID, "--asset-key", asset, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var job struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&job); err != nil {
		t.Fatalf("render output is not JSON: %v\n%s", err, out)
	}
	spec, err := schemas.Load(train, schemas.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := runner.Resolve(runner.Step{Name: spec.Metadata.Name,
		Dagster: runner.Dagster{RunID: runID, AssetKeys: []string{asset}, Context: []byte("{}")}}, nil)
	if job.Metadata.Name != run.ID {
		t.Errorf("render names the RayJob %q; run under Dagster creates %q", job.Metadata.Name, run.ID)
	}
}
