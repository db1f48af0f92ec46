package schemas

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

func TestApplySet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		set     []string
		want    any
		wantErr string
	}{
		{
			name: "string map keeps text",
			set:  []string{"spec.runtimeEnv.env_vars.THRESHOLD=0.75"},
			want: map[string]any{"spec": map[string]any{"runtimeEnv": map[string]any{"env_vars": map[string]any{"THRESHOLD": "0.75"}}}},
		},
		{
			name: "numbers and lists parse as YAML",
			set:  []string{"spec.workers=[1, a]", "spec.n=3"},
			want: map[string]any{"spec": map[string]any{"workers": []any{jsonNum("1"), "a"}, "n": jsonNum("3")}},
		},
		{
			name: "list index",
			set:  []string{"spec.workers=[{replicas: 1}]", "spec.workers.0.replicas=4"},
			want: map[string]any{"spec": map[string]any{"workers": []any{map[string]any{"replicas": jsonNum("4")}}}},
		},
		{
			name:    "no equals",
			set:     []string{"spec.run"},
			wantErr: `--set spec.run: expected path=value, e.g. spec.timeouts.run=10m`,
		},
		{
			name:    "through a scalar",
			set:     []string{"a=1", "a.b=2"},
			wantErr: `--set a.b=2: /a/b: cannot set "a.b": "a" is not a map or list`,
		},
		{
			name:    "bad index",
			set:     []string{"l=[1]", "l.5=2"},
			wantErr: `--set l.5=2: /l/5: cannot set "l.5": "5" is not an index of a list of 1 items`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ApplySet(nil, tt.set)
			if tt.wantErr != "" {
				var ve *ValidationErrors
				if !errors.As(err, &ve) || err.Error() != tt.wantErr {
					t.Fatalf("ApplySet error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ApplySet (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadWithSet(t *testing.T) {
	t.Parallel()
	spec, err := Load("../examples/ads_ranking/eval.yaml", LoadOptions{Set: []string{
		"spec.timeouts.run=30m",
		"spec.runtimeEnv.env_vars.ADS_AUC_THRESHOLD=0.75",
		"spec.cluster.workers.0.replicas=1",
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{spec.Spec.Timeouts.Run.String(), spec.Spec.RuntimeEnv["env_vars"].(map[string]any)["ADS_AUC_THRESHOLD"]}
	if diff := cmp.Diff([]any{"30m0s", "0.75"}, got); diff != "" {
		t.Errorf("overrides (-want +got):\n%s", diff)
	}
}

// TestSetErrorsBlameTheOverride checks that a problem with a value --set
// gave names the --set argument, not the file that never held it.
func TestSetErrorsBlameTheOverride(t *testing.T) {
	t.Parallel()
	const eval = "../examples/ads_ranking/eval.yaml"
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{
			name: "bad value",
			set:  []string{"spec.teardown=sometimes"},
			want: `--set spec.teardown=sometimes: /spec/teardown: value must be one of 'always', 'on_success', 'never'`,
		},
		{
			name: "a value close to an allowed one",
			set:  []string{"spec.teardown=On_Sucess"},
			want: `--set spec.teardown=On_Sucess: /spec/teardown: value must be one of 'always', 'on_success', 'never' (did you mean "on_success"?)`,
		},
		{
			name: "unknown key",
			set:  []string{"spec.timeouts.rn=10m"},
			want: `--set spec.timeouts.rn=10m: /spec/timeouts/rn: unknown key "rn" (did you mean "run"?)`,
		},
		{
			name: "inside a value it set",
			set:  []string{"spec.cluster.workers=[{name: a, cpus: 1, memory: 1Gi, replica: 2}]"},
			want: `--set spec.cluster.workers=[{name: a, cpus: 1, memory: 1Gi, replica: 2}]: ` +
				`/spec/cluster/workers/0/replica: unknown key "replica" (did you mean "replicas"?)`,
		},
		{
			name: "each override answers for its own value",
			set:  []string{"spec.timeouts.run=1h", "metadata.name=Bad_Name"},
			want: `--set metadata.name=Bad_Name: /metadata/name: "Bad_Name" is not a DNS-1035 label ` +
				`(lower-case letters, digits and '-', starting with a letter, ending with a letter or digit)`,
		},
		// The checks a file's text gets hold for what --set brings in.
		{
			name: "control character in an env var",
			set:  []string{"spec.runtimeEnv.env_vars.F=x\x01y"},
			want: `--set "spec.runtimeEnv.env_vars.F=x\x01y": /spec/runtimeEnv/env_vars/F: ` +
				"contains the control character U+0001, which Ray and Kubernetes do not accept",
		},
		{
			name: "NUL in the entrypoint",
			set:  []string{"spec.entrypoint=python x.py\x00"},
			want: `--set "spec.entrypoint=python x.py\x00": /spec/entrypoint: ` +
				"contains the control character U+0000, which Ray and Kubernetes do not accept",
		},
		{
			name: "control character in a key it set",
			set:  []string{"spec.runtimeEnv.env_vars.A\x1bB=x"},
			want: `--set "spec.runtimeEnv.env_vars.A\x1bB=x": "/spec/runtimeEnv/env_vars/A\x1bB": ` +
				"the key contains the control character U+001B, which is not allowed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(eval, LoadOptions{Set: tt.set})
			var ve *ValidationErrors
			if !errors.As(err, &ve) {
				t.Fatalf("Load = %v, want *ValidationErrors", err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if i := strings.IndexFunc(err.Error(), func(r rune) bool { return r != '\n' && !unicode.IsPrint(r) }); i >= 0 {
				t.Errorf("the error would print a control character on the terminal: %q", err.Error())
			}
		})
	}
}
