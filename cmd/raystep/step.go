package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"go.uber.org/zap"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/schemas"
)

// stepFromSpec reduces a validated spec and the Dagster invocation (an
// inactive session when standalone) to the runner's Step.
func stepFromSpec(spec *schemas.Spec, sess *pipes.Session) (runner.Step, error) {
	js := spec.Spec
	step := runner.Step{
		Name:       spec.Metadata.Name,
		Kind:       string(js.Kind),
		Entrypoint: js.Entrypoint,
		WorkingDir: js.WorkingDir,
		Excludes:   excludesOf(js.RuntimeEnv),
		RuntimeEnv: js.RuntimeEnv,
		Resources: runner.Resources{
			CPUs:   js.EntrypointResources.CPUs,
			GPUs:   js.EntrypointResources.GPUs,
			Memory: js.EntrypointResources.Memory.Value(),
			Custom: js.EntrypointResources.Resources,
		},
		ProvisionTimeout: js.Timeouts.Provision,
		RunTimeout:       js.Timeouts.Run,
		Teardown:         runner.TeardownPolicy(js.Teardown),
		Shape:            shape(js.Cluster),
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

// shape describes the spec's cluster, e.g. "head 2 CPU 4Gi; gpu 2x(8 CPU
// 32Gi 1 a100-80gb)".
func shape(c schemas.Cluster) string {
	parts := []string{fmt.Sprintf("head %s CPU %s", c.Head.CPUs.String(), c.Head.Memory.String())}
	for _, w := range c.Workers {
		desc := fmt.Sprintf("%s %dx(%s CPU %s", w.Name, w.Replicas, w.CPUs.String(), w.Memory.String())
		if w.GPUsPerWorker > 0 {
			desc += fmt.Sprintf(" %d %s", w.GPUsPerWorker, w.GPUType)
		}
		parts = append(parts, desc+")")
	}
	return strings.Join(parts, "; ")
}

// newBackend builds the backend named by --backend or RAYSTEP_BACKEND for
// one spec, and adjusts what the step reports about its cluster; notice
// tells the user about a choice made for them. It is the one place
// backends are chosen.
func (a *app) newBackend(name string, spec *schemas.Spec, profile *schemas.Profile, step *runner.Step, notice func(string)) (runner.Backend, error) {
	switch name {
	case "local":
		return a.localBackend(step, notice)
	case "kuberay":
		return a.kuberayBackend(spec, profile, notice)
	default:
		return nil, &usageError{fmt.Errorf("--backend %q: want local or kuberay", name)}
	}
}

// localBackend runs on a private head, or on the existing cluster that
// RAY_ADDRESS, RAY_API_SERVER_ADDRESS or RAYSTEP_DASHBOARD_URL names. The
// spec's cluster shape does not apply on this machine, so the step reports
// the machine instead.
func (a *app) localBackend(step *runner.Step, notice func(string)) (runner.Backend, error) {
	bin := a.cfg.RayBin
	if bin != "" && !strings.Contains(bin, "/") {
		found, err := exec.LookPath(bin)
		if err != nil {
			return nil, &usageError{fmt.Errorf("RAYSTEP_RAY_BIN=%s: %w", bin, errors.Join(err, rayhead.ErrRayNotFound))}
		}
		bin = found
	}
	b := &local.Backend{
		Address:      a.cfg.RayAddress,
		DashboardURL: firstNonEmpty(a.cfg.DashboardURL, a.cfg.RayAPIServerAddress),
		Head:         rayhead.Options{RayBin: bin},
		Logger:       a.log.Named("local"),
	}
	if a.cfg.LogLevel != "debug" { // the head's start and stop are phases already shown
		b.Logger = b.Logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	step.GPUType, step.GPUCount = "", 0
	if b.Existing() {
		if err := local.CheckAddress(b.DashboardURL, b.Address); err != nil {
			return nil, &usageError{err}
		}
		token, from, err := a.cfg.clusterToken()
		if err != nil {
			return nil, err
		}
		b.Token, b.TokenFrom = token, from
		step.Shape = "existing ray cluster"
		return b, nil
	}
	step.Shape = "private ray head on this machine"
	if step.Teardown != runner.TeardownAlways {
		notice(fmt.Sprintf("teardown %q keeps nothing with a private local head: the head belongs to this step "+
			"and stops with it; set RAY_ADDRESS to run on a cluster that outlives the step", step.Teardown))
		step.Teardown = runner.TeardownAlways
	}
	return b, nil
}
