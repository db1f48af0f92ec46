package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sethvargo/go-envconfig"
)

// runTest runs raystep in-process with env as its whole environment.
func runTest(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runTestStdin(t, env, "", args...)
}

// runTestStdin is runTest with stdin as the standard input.
func runTestStdin(t *testing.T, env map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, lookup: envconfig.MapLookuper(env)}
	code = a.main(context.Background(), args)
	return code, out.String(), errOut.String()
}

const (
	train    = "../../examples/ads_ranking/train.yaml"
	eval     = "../../examples/ads_ranking/eval.yaml"
	batch    = "../../examples/ads_ranking/batch_inference.yaml"
	platform = "../../examples/platform.yaml"
	invalid  = "../../schemas/testdata/invalid/"
)

func TestCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		env        map[string]string
		stdin      string
		args       []string
		wantCode   int
		wantOut    string
		wantErr    string
		wantErrHas string
	}{
		{
			name: "validate examples", args: []string{"validate", "-f", train, "-f", eval, "-f", batch},
			wantOut: train + ": ok\n" + eval + ": ok\n" + batch + ": ok\n",
		},
		{
			name: "validate with env profile", env: map[string]string{"RAYSTEP_PROFILE": platform},
			args: []string{"validate", "-f", train}, wantOut: train + ": ok\n",
		},
		{
			name: "three mistakes", args: []string{"validate", "-f", invalid + "three_mistakes.yaml"}, wantCode: 2,
			wantErr: invalid + `three_mistakes.yaml: /metadata/name: "Ads_Train" is not a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, ending with a letter or digit)
` + invalid + `three_mistakes.yaml: /spec/cluster/workers/0/gpuType: unknown gpuType "h100-xxl": profile builtin has a100-80gb, h100-80gb, l4, t4
` + invalid + `three_mistakes.yaml: /spec/timeouts/run: "3 hours" is not a duration (e.g. 90s, 15m, 24h)
`,
		},
		{
			name: "errors of all files", args: []string{"validate", "-f", invalid + "unknown_keys.yaml", "-f", train, "-f", invalid + "broken_yaml.yaml"},
			wantCode: 2, wantOut: train + ": ok\n",
			wantErr: invalid + `unknown_keys.yaml: /spec/clster: unknown key "clster" (did you mean "cluster"?)
` + invalid + `unknown_keys.yaml: /spec/cluster/head/gpus: unknown key "gpus" (did you mean "cpus"?)
` + invalid + `unknown_keys.yaml: /spec/cluster/workers/0/replica: unknown key "replica" (did you mean "replicas"?)
` + invalid + `broken_yaml.yaml: line 7: did not find expected ',' or ']'
`,
		},
		{
			name: "set override", args: []string{"validate", "-f", eval, "--set", "spec.teardown=sometimes"}, wantCode: 2,
			wantErr: "--set spec.teardown=sometimes: /spec/teardown: value must be one of 'always', 'on_success', 'never'\n",
		},
		{
			name: "unknown key from --set", args: []string{"validate", "-f", eval, "--set", "spec.timeouts.rn=10m"}, wantCode: 2,
			wantErr: "--set spec.timeouts.rn=10m: /spec/timeouts/rn: unknown key \"rn\" (did you mean \"run\"?)\n",
		},
		{
			name: "spec from stdin", stdin: readFile(t, train), args: []string{"validate", "-f", "-"},
			wantOut: "<stdin>: ok\n",
		},
		{
			name: "bad spec from stdin", stdin: "kind: RayStep\n", args: []string{"validate", "-f", "-"}, wantCode: 2,
			wantErrHas: "<stdin>: /apiVersion: required key \"apiVersion\" is missing\n",
		},
		{
			name: "binary spec from stdin", stdin: "\x7fELF\x02\x01\x01\x00", args: []string{"render", "-f", "-"}, wantCode: 2,
			wantErr: "<stdin>: is a binary file, not a YAML or JSON spec (it contains NUL bytes)\n",
		},
		{
			name: "stdin workingDir is relative to the current directory", stdin: strings.Replace(readFile(t, train),
				"workingDir: .", "workingDir: ./no-such-dir", 1), args: []string{"validate", "-f", "-"}, wantCode: 2,
			wantErrHas: "<stdin>: /spec/workingDir: \"./no-such-dir\" (relative to the current directory) does not exist",
		},
		{
			name: "missing profile", args: []string{"validate", "--profile", "nope.yaml", "-f", train}, wantCode: 2,
			wantErr: "nope.yaml: cannot read the file: it does not exist\n",
		},
		{name: "validate without files", args: []string{"validate"}, wantCode: 2, wantErrHas: "at least one -f SPEC"},
		{name: "unknown flag", args: []string{"validate", "--nope"}, wantCode: 2, wantErrHas: "unknown flag: --nope"},
		{name: "run without file", args: []string{"run"}, wantCode: 2, wantErrHas: "-f SPEC is required"},
		{name: "run on unknown backend", env: map[string]string{"RAYSTEP_BACKEND": "slurm"}, args: []string{"run", "-f", train}, wantCode: 2, wantErrHas: `--backend "slurm"`},
		{name: "run with a broken pipes bootstrap", env: map[string]string{"DAGSTER_PIPES_CONTEXT": "x", "DAGSTER_PIPES_MESSAGES": "y"}, args: []string{"run", "-f", train}, wantCode: 2, wantErrHas: "open dagster pipes"},
		{name: "bad output", args: []string{"render", "-f", train, "-o", "toml"}, wantCode: 2, wantErrHas: `want yaml or json`},
		{name: "bad log level", env: map[string]string{"RAYSTEP_LOG_LEVEL": "x"}, args: []string{"version"}, wantCode: 2, wantErrHas: `RAYSTEP_LOG_LEVEL="x"`},
		{name: "version", args: []string{"version"}, wantOut: "raystep dev"},
		{name: "ls bad output", args: []string{"ls", "-o", "yaml"}, wantCode: 2, wantErrHas: `-o "yaml": want wide or json`},
		{name: "ls -A with a namespace", args: []string{"ls", "-A", "-n", "ml-ads"}, wantCode: 2, wantErrHas: "ls: -A and --namespace exclude each other"},
		{name: "gc -A with a namespace", args: []string{"gc", "-A", "-n", "ml-ads"}, wantCode: 2, wantErrHas: "gc: -A and --namespace exclude each other"},
		{name: "gc negative age", args: []string{"gc", "--older-than", "-1h"}, wantCode: 2, wantErrHas: "must not be negative"},
		{name: "ls without a kubeconfig", env: map[string]string{"HOME": "/nonexistent-home", "RAYSTEP_BACKEND": "kuberay"}, args: []string{"ls"}, wantCode: 3,
			wantErr: "raystep: ls looks at Kubernetes: no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or start a local cluster with `make sandbox`\n"},
		{name: "gc without a kubeconfig", env: map[string]string{"RAYSTEP_BACKEND": "kuberay"}, args: []string{"gc", "--dry-run"}, wantCode: 3,
			wantErr: "raystep: gc looks at Kubernetes: no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or start a local cluster with `make sandbox`\n"},
		{name: "run on kuberay without a kubeconfig", args: []string{"run", "-f", train, "--backend", "kuberay"}, wantCode: 3,
			wantErr: "raystep: run --backend kuberay looks at Kubernetes: no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or start a local cluster with `make sandbox`\n"},
		{name: "gc zero heartbeat grace", args: []string{"gc", "--heartbeat-grace", "0s"}, wantCode: 2, wantErrHas: "--heartbeat-grace 0s: must be positive"},
		{name: "ls without a cluster", args: []string{"ls", "--kubeconfig", "/nonexistent/kubeconfig"}, wantCode: 3, wantErrHas: "/nonexistent/kubeconfig"},
		{name: "schema arg", args: []string{"schema", "other"}, wantCode: 2, wantErrHas: `schema: unknown schema "other": want jobspec or profile`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runTestStdin(t, tt.env, tt.stdin, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, errOut)
			}
			if strings.HasPrefix(tt.wantOut, "raystep ") {
				if !strings.HasPrefix(out, tt.wantOut) {
					t.Errorf("stdout = %q, want prefix %q", out, tt.wantOut)
				}
			} else if diff := cmp.Diff(tt.wantOut, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if tt.wantErrHas != "" {
				if !strings.Contains(errOut, tt.wantErrHas) {
					t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErrHas)
				}
			} else if diff := cmp.Diff(tt.wantErr, errOut); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderJSON(t *testing.T) {
	t.Parallel()
	code, out, errOut := runTest(t, nil, "render", "-f", train, "-o", "json", "--profile", platform)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var job struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			RayClusterSpec struct {
				WorkerGroupSpecs []struct {
					Template struct {
						Spec struct {
							NodeSelector map[string]string   `json:"nodeSelector"`
							Tolerations  []map[string]string `json:"tolerations"`
							Containers   []struct {
								Resources struct {
									Limits map[string]string `json:"limits"`
								} `json:"resources"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"workerGroupSpecs"`
			} `json:"rayClusterSpec"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&job); err != nil {
		t.Fatalf("render output is not JSON: %v\n%s", err, out)
	}
	pod := job.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec
	got := []string{job.APIVersion, job.Kind, pod.NodeSelector["cloud.google.com/gke-accelerator"],
		pod.Tolerations[0]["key"], pod.Containers[0].Resources.Limits["nvidia.com/gpu"]}
	want := []string{"ray.io/v1", "RayJob", "nvidia-a100-80gb", "nvidia.com/gpu", "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered RayJob (-want +got):\n%s", diff)
	}
}

func TestRenderMatchesGolden(t *testing.T) {
	t.Parallel()
	code, out, errOut := runTest(t, map[string]string{"RAYSTEP_PROFILE": platform}, "render", "-f", eval,
		"--dagster-run-id", "3f2a9c1b-7d0e-4c55-9a51-0e2f6b8f4c11", "--step-key", "ads_ranking_model",
		"--retry-number", "1", "--asset-key", "ads/ranking_model")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := readFile(t, "../../runner/kuberay/testdata/eval.rayjob.yaml")
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("render differs from the builder's golden file (-want +got):\n%s", diff)
	}
}

func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"schema"}, {"schema", "profile"}} {
		code, out, _ := runTest(t, nil, args...)
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
			t.Fatalf("%v: exit %d, %v", args, code, err)
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%v: $schema = %v", args, doc["$schema"])
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "validate", "render", "schema", "version"} {
		code, out, _ := runTest(t, nil, cmd, "--help")
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%s --help: exit %d, output %q", cmd, code, out)
		}
	}
}
