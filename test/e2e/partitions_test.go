package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// partitionSpec is a spec whose entrypoint and env var DAY use the
// partition variables; the shell prints them with the ones Ray's job env
// holds.
const partitionSpec = `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: partitioned, owner: me}
spec:
  kind: train
  entrypoint: >-
    echo "arg=${RAYSTEP_PARTITION_KEY} day=$DAY
    window=$RAYSTEP_PARTITION_TIME_WINDOW_START..$RAYSTEP_PARTITION_TIME_WINDOW_END
    range=$RAYSTEP_PARTITION_KEY_RANGE_START..$RAYSTEP_PARTITION_KEY_RANGE_END home=${HOME:+set} literal=$${RAYSTEP_X:-none}"
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
  runtimeEnv:
    env_vars: {DAY: "day-${RAYSTEP_PARTITION_KEY}"}
`

// TestRunPartitionVariables runs a spec for one daily partition on a real
// head, bootstrapped as Dagster would: the entrypoint and env var get the
// key substituted, the job's environment has the key range (the key twice)
// and the time window in RFC 3339, and the shell's own ${...} reach it
// untouched.
func TestRunPartitionVariables(t *testing.T) {
	key := "2024-03-05"
	env, messages := pipesEnv(t, pipes.ContextData{
		AssetKeys: []string{"daily"}, RunID: runID(t), Extras: map[string]any{}, PartitionKey: &key,
		PartitionKeyRange:   &pipes.PartitionKeyRange{Start: key, End: key},
		PartitionTimeWindow: &pipes.TimeWindow{Start: "2024-03-05T00:00:00+00:00", End: "2024-03-06T00:00:00+00:00"},
	})
	file := filepath.Join(t.TempDir(), "partitioned.yaml")
	if err := os.WriteFile(file, []byte(partitionSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	env["RAY_ADDRESS"] = ray.Head(t).DashboardURL()
	code, stdout, stderr := runRay(t, env, "run", "-f", file)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	want := "arg=2024-03-05 day=day-2024-03-05 window=2024-03-05T00:00:00Z..2024-03-06T00:00:00Z " +
		"range=2024-03-05..2024-03-05 home=set literal=none"
	// The job's plain lines go to raystep's stdout, Dagster's compute log.
	if !strings.Contains(stdout, want+"\n") {
		t.Errorf("the job printed\n%s\nwant a line %q", stdout, want)
	}
	if ms := readMessages(t, messages); ms[len(ms)-1].Method != "closed" || ms[len(ms)-1].Params["exception"] != nil {
		t.Errorf("pipes session did not close cleanly: %v", methods(ms))
	}
}

// TestRunPartitionVariableWithoutPartition runs a spec that uses the
// partition key in a run without partitions, standalone and under a Dagster
// run of an unpartitioned asset: exit 2 naming the file, the field and the
// variable, before ray is ever run (no head is started).
func TestRunPartitionVariableWithoutPartition(t *testing.T) {
	for _, underDagster := range []bool{false, true} {
		name := "standalone"
		if underDagster {
			name = "under dagster"
		}
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "partitioned.yaml")
			if err := os.WriteFile(file, []byte(partitionSpec), 0o644); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			if underDagster {
				env, _ = pipesEnv(t, pipes.ContextData{AssetKeys: []string{"m"}, RunID: runID(t), Extras: map[string]any{}})
			}
			bin, invocations := rayWrapper(t)
			env["RAYSTEP_RAY_BIN"] = bin // no RAY_ADDRESS: were the spec let through, raystep would start a head
			code, _, stderr := runRay(t, env, "run", "-f", file)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitUsage, stderr)
			}
			for _, want := range []string{
				file + ": /spec/entrypoint: ${RAYSTEP_PARTITION_KEY} is defined only when Dagster runs the step for a partition",
				file + ": /spec/runtimeEnv/env_vars/DAY: ${RAYSTEP_PARTITION_KEY} is defined only",
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if _, err := os.Stat(invocations); !os.IsNotExist(err) {
				t.Errorf("ray was run for a refused spec (stat %s: %v)", invocations, err)
			}
		})
	}
}

// hostileKeySpec prints, as JSON, the arguments the driver got: the three
// partition variables of the job's environment, each quoted.
const hostileKeySpec = `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: hostile-keys, owner: me}
spec:
  kind: train
  entrypoint: >-
    python -c 'import json, sys; print("argv" + "=" + json.dumps(sys.argv[1:]))'
    "$RAYSTEP_PARTITION_KEY" "$RAYSTEP_PARTITION_KEY_RANGE_START" "$RAYSTEP_PARTITION_KEY_RANGE_END"
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
`

// TestRunHostilePartitionKeys gives a step partition keys that are shell
// code, as a sensor, a file name or a person in the Dagster UI may. Used
// as the quoted environment variable, each reaches the driver on a real
// head as the one argument it is; substituted as ${RAYSTEP_PARTITION_KEY}
// into the entrypoint (which Ray gives to sh -c), the run is refused with
// exit 2 before ray is run. Neither way runs the code in them.
func TestRunHostilePartitionKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	made := func(name string) string { return filepath.Join(dir, name) }
	keys := []string{
		"x; touch " + made("semicolon") + " #",
		"$(touch " + made("substitution") + ")",
		"a b `touch " + made("backquotes") + "` 'c' \"d\"",
	}
	bootstrap := func() (map[string]string, string) {
		// Three keys in one job: the key, and a range from the second to the third.
		return pipesEnv(t, pipes.ContextData{
			AssetKeys: []string{"daily"}, RunID: runID(t), Extras: map[string]any{}, PartitionKey: &keys[0],
			PartitionKeyRange: &pipes.PartitionKeyRange{Start: keys[1], End: keys[2]},
		})
	}
	writeSpec := func(spec string) string {
		file := filepath.Join(t.TempDir(), "hostile.yaml")
		if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	noneMade := func() {
		t.Helper()
		for _, name := range []string{"semicolon", "substitution", "backquotes"} {
			if _, err := os.Stat(made(name)); !os.IsNotExist(err) {
				t.Errorf("a partition key ran code: %s exists (stat: %v)", made(name), err)
			}
		}
	}

	t.Run("environment variable", func(t *testing.T) {
		env, messages := bootstrap()
		env["RAY_ADDRESS"] = ray.Head(t).DashboardURL()
		code, stdout, stderr := runRay(t, env, "run", "-f", writeSpec(hostileKeySpec))
		if code != exitOK {
			t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s", code, stderr, stdout)
		}
		var line string
		for l := range strings.Lines(stdout) {
			if rest, ok := strings.CutPrefix(l, "argv="); ok {
				line = strings.TrimSuffix(rest, "\n")
			}
		}
		if line == "" {
			t.Fatalf("the driver printed no argv= line:\n%s", stdout)
		}
		var argv []string
		if err := json.Unmarshal([]byte(line), &argv); err != nil {
			t.Fatalf("argv=%s: %v", line, err)
		}
		if diff := cmp.Diff(keys, argv); diff != "" {
			t.Errorf("the driver's arguments (-want +got):\n%s", diff)
		}
		if ms := readMessages(t, messages); ms[len(ms)-1].Method != "closed" || ms[len(ms)-1].Params["exception"] != nil {
			t.Errorf("pipes session did not close cleanly: %v", methods(ms))
		}
		noneMade()
	})

	t.Run("substituted into the entrypoint", func(t *testing.T) {
		env, _ := bootstrap()
		bin, invocations := rayWrapper(t)
		env["RAYSTEP_RAY_BIN"] = bin // no RAY_ADDRESS: were the spec let through, raystep would start a head
		spec := strings.Replace(hostileKeySpec, `"$RAYSTEP_PARTITION_KEY" `, `${RAYSTEP_PARTITION_KEY} `, 1)
		file := writeSpec(spec)
		code, _, stderr := runRay(t, env, "run", "-f", file)
		if code != exitUsage {
			t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitUsage, stderr)
		}
		want := file + `: /spec/entrypoint: ${RAYSTEP_PARTITION_KEY} is "x; touch ` + made("semicolon") +
			` #", which the shell would not read as one plain word (it holds ';')`
		if !strings.Contains(stderr, want) || !strings.Contains(stderr, `"$RAYSTEP_PARTITION_KEY"`) {
			t.Errorf("stderr lacks %q and the way out:\n%s", want, stderr)
		}
		if _, err := os.Stat(invocations); !os.IsNotExist(err) {
			t.Errorf("ray was run for a refused spec (stat %s: %v)", invocations, err)
		}
		noneMade()
	})
}
