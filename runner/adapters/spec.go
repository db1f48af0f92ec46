package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// A spec and a Dagster invocation, in the runner's vocabulary.

// StepFromSpec reduces a validated spec and the Dagster invocation (an
// inactive session when standalone) to the runner's Step.
func StepFromSpec(spec *schemas.Spec, sess *pipes.Session) (runner.Step, error) {
	js := spec.Spec
	step := runner.Step{
		Name:       spec.Metadata.Name,
		Owner:      spec.Metadata.Owner,
		Kind:       string(js.Kind),
		Entrypoint: js.Entrypoint,
		WorkingDir: js.WorkingDir,
		Excludes:   Excludes(js.RuntimeEnv),
		RuntimeEnv: js.RuntimeEnv,
		Resources: runner.Resources{
			CPUs:   js.EntrypointResources.CPUs,
			GPUs:   js.EntrypointResources.GPUs,
			Memory: js.EntrypointResources.Memory.Value(),
			Custom: js.EntrypointResources.Resources,
		},
		ProvisionTimeout: js.Timeouts.Provision,
		QueueTimeout:     js.Timeouts.Queue,
		RunTimeout:       js.Timeouts.Run,
		Teardown:         runner.TeardownPolicy(js.Teardown),
		Shape:            js.Cluster.Shape(),
	}
	for _, w := range js.Cluster.Workers {
		if w.GPUsPerWorker > 0 {
			step.GPUCount += int(w.GPUsPerWorker * w.Replicas)
			if step.GPUType == "" {
				step.GPUType = w.GPUType
			}
		}
	}
	if !sess.Active() {
		return step, nil
	}
	data := sess.Context().Data()
	raw, err := json.Marshal(data)
	if err != nil {
		return runner.Step{}, fmt.Errorf("encode the dagster pipes context: %w", err)
	}
	step.Dagster = runner.Dagster{RunID: data.RunID, RetryNumber: data.RetryNumber, AssetKeys: data.AssetKeys, Context: raw}
	return step, nil
}

// Partitions is what the Dagster invocation tells of the partitions the
// step targets: none when standalone or unpartitioned. A single partition
// is the range from its key to its key, and the time window is normalised
// from Dagster's ISO 8601 to RFC 3339.
func Partitions(sess *pipes.Session) (*schemas.Partitions, error) {
	p := &schemas.Partitions{Values: map[string]string{}}
	if !sess.Active() {
		return p, nil
	}
	return PartitionsFrom(sess.Context().Data())
}

// PartitionsFrom is Partitions of a Pipes context's data.
func PartitionsFrom(data pipes.ContextData) (*schemas.Partitions, error) {
	vals := map[string]string{}
	if data.PartitionKey != nil {
		vals[schemas.VarPartitionKey] = *data.PartitionKey
		vals[schemas.VarPartitionKeyRangeStart] = *data.PartitionKey
		vals[schemas.VarPartitionKeyRangeEnd] = *data.PartitionKey
	}
	if r := data.PartitionKeyRange; r != nil {
		vals[schemas.VarPartitionKeyRangeStart] = r.Start
		vals[schemas.VarPartitionKeyRangeEnd] = r.End
	}
	if w := data.PartitionTimeWindow; w != nil {
		start, err := rfc3339(w.Start)
		if err != nil {
			return nil, fmt.Errorf("partition time window start: %w", err)
		}
		end, err := rfc3339(w.End)
		if err != nil {
			return nil, fmt.Errorf("partition time window end: %w", err)
		}
		vals[schemas.VarPartitionTimeWindowStart] = start
		vals[schemas.VarPartitionTimeWindowEnd] = end
	}
	return &schemas.Partitions{Values: vals}, nil
}

// isoLayouts are the ISO 8601 forms Python's isoformat writes for an aware
// datetime, as Dagster sends time windows.
var isoLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-07", "2006-01-02 15:04:05.999999999Z07:00"}

// rfc3339 rewrites an ISO 8601 time with an offset as RFC 3339 ("Z" for UTC).
func rfc3339(s string) (string, error) {
	for _, layout := range isoLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Format(time.RFC3339Nano), nil
		}
	}
	return "", fmt.Errorf("%q is not an ISO 8601 time with an offset", s)
}

// CheckWorkingDir walks the spec's working dir as its package would be
// built, so that a missing, unreadable, looping or oversized one, or a bad
// exclude pattern, is a validation error of file (exit 2) before anything
// is created.
func CheckWorkingDir(ctx context.Context, file string, spec *schemas.Spec) error {
	js := spec.Spec
	if js.WorkingDir == "" {
		return nil
	}
	_, err := raysubmit.CheckWorkingDir(ctx, js.WorkingDir, raysubmit.PackageOptions{Excludes: Excludes(js.RuntimeEnv)})
	var wde *raysubmit.WorkingDirError
	if !errors.As(err, &wde) {
		return err // nil, or the step was cancelled
	}
	if file == "-" {
		file = schemas.StdinName
	}
	fe := schemas.FieldError{File: file, Pointer: "/spec/workingDir", Message: wde.Error()}
	var pe *raysubmit.PatternError
	if errors.As(err, &pe) && pe.File == "" {
		fe.Pointer = fmt.Sprintf("/spec/runtimeEnv/excludes/%d", pe.Index)
		fe.Message = fmt.Sprintf("%q: %v", pe.Pattern, pe.Err)
	}
	return &schemas.ValidationErrors{Errors: []schemas.FieldError{fe}}
}

// Excludes returns runtime_env's excludes, gitignore patterns the
// schema has checked are strings.
func Excludes(env map[string]any) []string {
	list, _ := env["excludes"].([]any)
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
