package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// provision creates (or finds) the cluster and waits until it is ready.
// Infrastructure failures the cluster reports from then on cancel the step.
func (s *state) provision(ctx context.Context) error {
	cl, err := s.r.Backend.Provision(ctx, s.step, s.events)
	if cl != nil {
		s.cluster = cl
		s.events.know(cl.Name(), "")
		s.watch()
	}
	if err != nil {
		return fmt.Errorf("provision %s cluster %s: %w", s.r.Backend.Name(), s.id, err)
	}
	if cl == nil {
		return fmt.Errorf("provision %s cluster %s: backend returned no cluster", s.r.Backend.Name(), s.id)
	}
	if err := s.admission(ctx, cl); err != nil {
		return err
	}
	if err := cl.Ready(ctx); err != nil {
		return fmt.Errorf("wait for cluster %s: %w", cl.Name(), err)
	}
	s.note(PhaseProvision, "cluster %s ready", cl.Name())
	return nil
}

// admission waits until a queue admitted the cluster when the step has a
// queue clock (Step.QueueTimeout), then starts the provision clock.
func (s *state) admission(ctx context.Context, cl Cluster) error {
	if s.admitted == nil {
		return nil
	}
	if q, ok := cl.(Queued); ok {
		if err := q.Admitted(ctx); err != nil {
			return fmt.Errorf("wait for the queue to admit cluster %s: %w", cl.Name(), err)
		}
	}
	s.admitted()
	return nil
}

// watch cancels the step with the first failure the cluster reports, until
// the step's context ends.
func (s *state) watch() {
	ch, fail, done, gone := s.cluster.Failures(), s.fail, s.stepDone, &s.gone
	if ch == nil {
		return
	}
	go func() {
		select {
		case err, ok := <-ch:
			if ok && err != nil {
				gone.Store(errors.Is(err, ErrClusterGone))
				fail(&InfraError{Err: fmt.Errorf("cluster failed: %w", err)})
			}
		case <-done:
		}
	}()
}

// dashboard reaches the dashboard and connects the Jobs API client.
func (s *state) dashboard(ctx context.Context) error {
	d, err := s.cluster.Dashboard(ctx)
	if err != nil {
		return fmt.Errorf("reach dashboard of %s: %w", s.cluster.Name(), err)
	}
	jobs, err := s.r.Connect(ctx, d)
	if err != nil {
		return fmt.Errorf("connect to dashboard %s: %w", d.shownURL(), err)
	}
	s.dash, s.jobs = d, jobs
	s.events.know(s.cluster.Name(), d.shownURL())
	if d.PublicURL != "" && d.PublicURL != d.URL { // e.g. the head service over a port-forward: say both
		s.note(PhaseDashboard, "reached %s through %s", d.PublicURL, d.URL)
	} else {
		s.note(PhaseDashboard, "reached %s", d.shownURL())
	}
	return nil
}

// submit submits the job under the step's id, or attaches to the job a
// previous attempt submitted, and records it on the cluster.
func (s *state) submit(ctx context.Context) error {
	env, err := s.runtimeEnv()
	if err != nil {
		return err
	}
	req := JobRequest{
		SubmissionID: s.id,
		Entrypoint:   s.step.Entrypoint,
		RuntimeEnv:   env,
		Metadata:     s.jobMetadata(),
		Resources:    s.step.Resources,
	}
	s.submitted = true
	_, err = s.jobs.Submit(ctx, req)
	switch {
	case errors.Is(err, ErrAlreadySubmitted):
		s.attached = true
		s.note(PhaseSubmit, "job %s was already submitted: attaching", s.id)
	case err != nil:
		s.submitLost = true
		return fmt.Errorf("submit job %s: %w", s.id, err)
	default:
		s.note(PhaseSubmit, "job %s submitted", s.id)
	}
	if err := s.cluster.SetJobID(ctx, s.id); err != nil {
		return fmt.Errorf("record job %s on cluster %s: %w", s.id, s.cluster.Name(), err)
	}
	return nil
}

// runtimeEnv is the spec's runtime_env with the uploaded working_dir and the
// Pipes bootstrap merged into env_vars (the bootstrap wins).
func (s *state) runtimeEnv() (map[string]any, error) {
	env := maps.Clone(s.step.RuntimeEnv)
	if env == nil {
		env = map[string]any{}
	}
	vars := map[string]any{}
	switch v := env["env_vars"].(type) {
	case map[string]any:
		maps.Copy(vars, v)
	case map[string]string:
		for k, val := range v {
			vars[k] = val
		}
	}
	boot, err := s.bootstrap()
	if err != nil {
		return nil, err
	}
	for k, v := range boot {
		vars[k] = v
	}
	if len(vars) > 0 {
		env["env_vars"] = vars
	}
	if s.uri != "" {
		env["working_dir"] = s.uri
	}
	return env, nil
}

// The environment variables that bootstrap Pipes in the driver.
const (
	EnvPipesContext  = pipes.EnvContext
	EnvPipesMessages = pipes.EnvMessages
)

// bootstrap returns the driver's Pipes environment: the context inline and
// messages on stdout, where the relay finds them in the job's log.
func (s *state) bootstrap() (map[string]string, error) {
	if s.r.EncodeBootstrap == nil {
		return nil, nil
	}
	ctxParam, err := s.r.EncodeBootstrap(s.contextParams())
	if err != nil {
		return nil, fmt.Errorf("encode pipes context: %w", err)
	}
	msgParam, err := s.r.EncodeBootstrap(pipes.StdioMessagesParams("stdout"))
	if err != nil {
		return nil, fmt.Errorf("encode pipes messages: %w", err)
	}
	return map[string]string{EnvPipesContext: ctxParam, EnvPipesMessages: msgParam}, nil
}

// contextParams carries Dagster's context as received or, standalone, one
// of raystep's own with every key Pipes expects.
func (s *state) contextParams() pipes.Params {
	if s.step.Dagster.Context != nil {
		return pipes.Params{"data": s.step.Dagster.Context}
	}
	return pipes.ContextDataParams(pipes.ContextData{
		AssetKeys:   s.step.Dagster.AssetKeys,
		RunID:       s.runID,
		RetryNumber: s.step.Dagster.RetryNumber,
		Extras:      map[string]any{},
	})
}

// jobMetadata labels the Ray job with the step it belongs to.
func (s *state) jobMetadata() map[string]string {
	m := map[string]string{
		"raystep.dev/step-id":      s.id,
		"raystep.dev/spec":         s.step.Name,
		"raystep.dev/dagster-run":  s.runID,
		"raystep.dev/dagster-step": s.step.Dagster.Key(),
		"raystep.dev/retry":        strconv.Itoa(s.step.Dagster.RetryNumber),
	}
	if s.step.Kind != "" {
		m["raystep.dev/kind"] = s.step.Kind
	}
	return m
}
