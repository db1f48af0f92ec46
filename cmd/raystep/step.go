package main

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"

	"go.uber.org/zap"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/schemas"
)

// placement is what resolving a step needs to know about where it runs.
type placement struct {
	// backend is "local" or "kuberay".
	backend string
	// existing: the local backend runs on an existing cluster, not on a
	// private head.
	existing bool
	// namespace is the kuberay backend's namespace (kuberay.ResolveNamespace).
	namespace string
}

// resolveStep is the one place a step is resolved, before any backend sees
// it: its identity (runner.Resolve), its namespace, what it reports about
// its cluster and its teardown policy, decided for the backend it runs on.
// The runner and the backends only read the result. On the local backend
// the spec's cluster shape does not apply, so the step reports the machine
// instead; a private head belongs to the step and stops with it, so its
// teardown is always, and a notice on the step tells the user about that
// choice (the runner says it as a warning when the step starts).
func resolveStep(step runner.Step, p placement) runner.Step {
	step.Namespace = p.namespace
	switch {
	case p.backend == "local" && p.existing:
		step.GPUType, step.GPUCount, step.Shape = "", 0, "existing ray cluster"
	case p.backend == "local":
		step.GPUType, step.GPUCount, step.Shape = "", 0, "private ray head on this machine"
		if step.Teardown != runner.TeardownAlways {
			step.Notices = append(step.Notices, fmt.Sprintf("teardown %q keeps nothing with a private local head: "+
				"the head belongs to this step and stops with it; set RAY_ADDRESS to run on a cluster that outlives the step",
				step.Teardown))
			step.Teardown = runner.TeardownAlways
		}
	}
	return runner.Resolve(step, nil)
}

// previewStep is the step attempt `render` shows the RayJob of: the
// Dagster identity its flags name, exactly, in namespace ns. Nothing is
// made up: a standalone run's id is random, so no preview can know it.
func previewStep(spec *schemas.Spec, ns string, d runner.Dagster) runner.Step {
	name := spec.Metadata.Name
	d.StepKey = d.Key() // as runner.Resolve: the asset keys when no step key is given
	id := runner.StepID(name, d.RunID, d.StepKey, d.RetryNumber)
	return runner.Step{ID: id, Name: name, RunID: d.RunID, Namespace: ns, Dagster: d}
}

// newBackend builds the backend named by --backend or RAYSTEP_BACKEND for
// one spec and resolves the step for it (resolveStep). It is the one place backends are
// chosen; the backend gets the resolved step only when the runner
// provisions, and never changes it.
func (a *app) newBackend(o runOptions, spec *schemas.Spec, profile *schemas.Profile, step runner.Step) (runner.Step, runner.Backend, error) {
	switch name := firstNonEmpty(o.backend, a.cfg.Backend); name {
	case "local":
		if o.cluster != "" {
			return a.borrowLocal(step, o.cluster)
		}
		b, err := a.localBackend()
		if err != nil {
			return runner.Step{}, nil, err
		}
		return resolveStep(step, placement{backend: name, existing: b.Existing()}), b, nil
	case "kuberay":
		clients, kc, err := a.kube("run --backend kuberay")
		if err != nil {
			return runner.Step{}, nil, err
		}
		ns := kuberay.ResolveNamespace(kuberay.Namespaces{Flag: o.namespace, Env: a.cfg.Namespace,
			Spec: spec.Metadata.Namespace, Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
		step = resolveStep(step, placement{backend: name, namespace: ns})
		if o.cluster == "" { // a borrowed cluster was made as it was
			for _, w := range spec.Warnings {
				step.Notices = append(step.Notices, w.Error())
			}
		}
		return step, a.kuberayBackend(clients, kc, spec, profile), nil
	default:
		return runner.Step{}, nil, &usageError{fmt.Errorf("--backend %q: want local or kuberay", name)}
	}
}

// rayBin is RAYSTEP_RAY_BIN, looked up on PATH when it is a bare name;
// empty lets rayhead find ray.
func (a *app) rayBin() (string, error) {
	bin := a.cfg.RayBin
	if bin != "" && !strings.Contains(bin, "/") {
		found, err := exec.LookPath(bin)
		if err != nil {
			return "", &usageError{fmt.Errorf("RAYSTEP_RAY_BIN=%s: %w", bin, errors.Join(err, rayhead.ErrRayNotFound))}
		}
		bin = found
	}
	return bin, nil
}

// privateHeadSupported says whether this system can run a private local
// head: rayhead finds and reaps a head's processes through Linux's /proc
// and pidfds. Elsewhere only a cluster that exists already (RAY_ADDRESS,
// RAYSTEP_DASHBOARD_URL) or the KubeRay backend can run a step.
func privateHeadSupported() error {
	if runtime.GOOS == "linux" {
		return nil
	}
	return &usageError{fmt.Errorf("--backend local starts a private Ray head on Linux only, not on %s: "+
		"use --backend kuberay, or name a running Ray cluster with RAY_ADDRESS", runtime.GOOS)}
}

// localBackend runs on a private head, or on the existing cluster that
// RAY_ADDRESS, RAY_API_SERVER_ADDRESS or RAYSTEP_DASHBOARD_URL names.
func (a *app) localBackend() (*local.Backend, error) {
	bin, err := a.rayBin()
	if err != nil {
		return nil, err
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
	if !b.Existing() {
		if err := privateHeadSupported(); err != nil {
			return nil, err
		}
		if dir, err := a.localStateDir(); err == nil {
			b.Steps = local.StepsDir(dir) // without a home, ls and ui just do not see the step
		}
		return b, nil
	}
	if err := local.CheckAddress(b.DashboardURL, b.Address); err != nil {
		return nil, &usageError{err}
	}
	token, from, err := a.cfg.clusterToken()
	if err != nil {
		return nil, err
	}
	b.Token, b.TokenFrom = token, from
	return b, nil
}
