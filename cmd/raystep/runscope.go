package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/schemas"
)

// checkReuse refuses spec.cluster.reuse: run beside --cluster NAME: the
// step would be told to run on two clusters.
func checkReuse(spec *schemas.Spec, o runOptions) error {
	if spec.Spec.Cluster.Reuse == schemas.ReuseRun && o.cluster != "" {
		return &usageError{fmt.Errorf("run --cluster %s: %s: spec.cluster.reuse is run, which shares the run's own cluster: "+
			"drop --cluster or set spec.cluster.reuse=step", o.cluster, spec.File)}
	}
	return nil
}

// runScoped points backend b at the run-scoped cluster of the step's
// Dagster run (spec.cluster.reuse: run), creating it or attaching to it.
// A step without a Dagster run id (run from a shell) is a run of one
// step: it shares its cluster with nobody, and no run-status sensor would
// ever remove a cluster it left behind, so it gets a cluster of its own
// like reuse: step, and a notice says so.
func (a *app) runScoped(ctx context.Context, b runner.Backend, step *runner.Step, spec *schemas.Spec, profile *schemas.Profile) error {
	if step.Dagster.RunID == "" {
		step.Notices = append(step.Notices, "spec.cluster.reuse is run, but the step is not part of a Dagster run: "+
			"it gets a cluster of its own, deleted at its end")
		return nil
	}
	switch kb := b.(type) {
	case *kuberay.Backend:
		return a.runScopedKubeRay(ctx, kb, step, spec, profile)
	default:
		return a.runScopedLocal(ctx, b, step, spec)
	}
}

// runScopedKubeRay creates or attaches to the run's RayCluster, waits
// for it within the spec's provision timeout and makes the step's RayJob
// borrow it. The cluster expires the run's timeout (spec.timeouts.run)
// after the latest step that attached to it.
func (a *app) runScopedKubeRay(ctx context.Context, kb *kuberay.Backend, step *runner.Step, spec *schemas.Spec, profile *schemas.Profile) error {
	rc, err := kuberay.BuildRunCluster(spec, profile, step.Namespace, step.Dagster.RunID, time.Now().Add(spec.Spec.Timeouts.Run))
	if err != nil {
		return err
	}
	i := &kuberay.Interactive{Kube: kb.Kube, Ray: kb.Ray, KeepDir: a.keepDir(), Token: kb.Dashboard.Token,
		UnschedulableGrace: kb.UnschedulableGrace, Notify: a.notices()}
	actx, cancel := context.WithTimeoutCause(ctx, spec.Spec.Timeouts.Provision,
		fmt.Errorf("the run-scoped cluster was not ready within spec.timeouts.provision (%s)", spec.Spec.Timeouts.Provision))
	defer cancel()
	got, created, err := i.Attach(actx, rc)
	if err != nil {
		if errors.Is(err, kuberay.ErrClusterMismatch) {
			return &usageError{err}
		}
		return &runner.InfraError{Phase: runner.PhaseProvision, Err: err}
	}
	if kb.Dashboard.Token == "" {
		if kb.Dashboard.Token, err = i.ReadToken(ctx, got); err != nil {
			return &runner.InfraError{Phase: runner.PhaseProvision, Err: err}
		}
	}
	kb.Cluster = got.Name
	step.Shape = spec.Spec.Cluster.Shape() + " (run-scoped " + got.Namespace + "/" + got.Name + ")"
	how := "attached to"
	if created {
		how = "created"
	}
	step.Notices = append(step.Notices, fmt.Sprintf("%s the run-scoped cluster %s/%s of Dagster run %s, expiring %s: "+
		"the step never deletes it; raystep down --dagster-run-id %s does when the run ends",
		how, got.Namespace, got.Name, step.Dagster.RunID, got.Annotations[kuberay.AnnotationExpires], step.Dagster.RunID))
	return nil
}

// runScopedLocal starts or attaches to the run's detached private head
// and makes the step run on it as on an existing cluster, which the step
// leaves running. A backend already pointed at an existing cluster
// (RAY_ADDRESS, ...) keeps it: that cluster is shared already.
func (a *app) runScopedLocal(ctx context.Context, b runner.Backend, step *runner.Step, spec *schemas.Spec) error {
	lb, ok := b.(*local.Backend)
	if !ok {
		return fmt.Errorf("spec.cluster.reuse: run: backend %s has no run-scoped clusters", b.Name())
	}
	if lb.Existing() {
		step.Notices = append(step.Notices, "spec.cluster.reuse is run, but the step runs on an existing cluster already: it is used as is")
		return nil
	}
	c, err := a.runClusters(lb)
	if err != nil {
		return err
	}
	// A private head is the same whatever the cluster section asks for (no
	// pods, no GPUs), so the steps of a run share one whatever theirs say.
	name := runner.RunClusterName(step.Dagster.RunID, runner.ClusterHash(schemas.Cluster{}))
	in, token, started, err := c.UpRun(ctx, name, step.Dagster.RunID, spec.Spec.Timeouts.Run)
	if err != nil {
		return &runner.InfraError{Phase: runner.PhaseProvision, Err: err}
	}
	lb.DashboardURL, lb.Token, lb.TokenFrom = in.DashboardURL, token, in.TokenFile
	step.Shape = "run-scoped private ray head " + in.Name
	how := "attached to"
	if started {
		how = "started"
	}
	step.Notices = append(step.Notices, fmt.Sprintf("%s the run-scoped private head %s of Dagster run %s at %s, expiring %s: "+
		"the step never stops it; raystep down --dagster-run-id %s does when the run ends",
		how, in.Name, step.Dagster.RunID, in.DashboardURL, in.Expires.Format(time.RFC3339), step.Dagster.RunID))
	return nil
}

// runClusters are the local backend's clusters, recorded in the state
// dir (as up's), started with lb's ray. A head's warnings (a start that
// failed and is tried again) go to lb's log.
func (a *app) runClusters(lb *local.Backend) (*local.Clusters, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return nil, &usageError{err}
	}
	head := lb.Head
	if head.Logger == nil {
		head.Logger = lb.Logger
	}
	return &local.Clusters{Dir: dir, Head: head}, nil
}
