// Package runner owns the lifecycle of one raystep step: provision a Ray
// cluster through a Backend, reach its dashboard, submit the entrypoint
// under a deterministic submission id (attaching when a previous attempt
// already did), relay the job's log (plain lines to stdout, the driver's
// Pipes messages to Dagster), report raystep's own metadata on the
// materialization, and tear the cluster down on every path, cancellation
// and deadlines included. Everything the step has to tell is one stream of
// Events (the backend's notices too), which the caller renders for a
// person and which Dagster gets as log messages.
//
// The package declares the small interfaces it consumes (Backend, Cluster,
// Jobs, Session, Clock) and takes a plain Step; it leaves reading the spec,
// the Pipes wire format, the Ray Jobs HTTP client and the backends
// themselves to other packages, and choosing the exit code to the CLI (from
// the errors Run returns: see ErrJobFailed and its siblings).
package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Defaults for the Runner's zero fields.
const (
	DefaultTeardownTimeout = 5 * time.Minute
	DefaultStopTimeout     = 30 * time.Second
	DefaultPollInterval    = time.Second
)

// Runner runs steps. Its fields are the step's dependencies; set Backend
// and Connect, the rest have defaults. A Runner may run several steps, one
// at a time.
type Runner struct {
	// Backend provisions clusters.
	Backend Backend
	// Connect builds a Jobs API client for a cluster's dashboard.
	Connect func(ctx context.Context, d Dashboard) (Jobs, error)
	// Pack zips a working dir, without the paths that excludes (gitignore
	// patterns) match, into a content-hashed Package, and leaves nothing
	// behind when it fails or ctx ends. The runner calls it while the
	// cluster is provisioned. Required for a step with a WorkingDir.
	Pack func(ctx context.Context, dir string, excludes []string) (Package, error)
	// Session is the Dagster Pipes session; nil when standalone.
	Session Session
	// Stdout receives the job's plain log lines; nil discards them.
	Stdout io.Writer
	// Stderr receives, standalone, the text the driver sent for its stderr
	// stream (log_external_stream); nil discards it.
	Stderr io.Writer
	// Events receives every event of the step: the runner's notes and
	// warnings, the backend's (see ClusterRequest.Events), the step's end
	// and, standalone, the driver's reports. Nil for none. Under Dagster the
	// notes and warnings also go to Session as log messages.
	Events Sink
	// EncodeBootstrap encodes a Pipes bootstrap parameter (zlib, base64);
	// nil means the driver gets no Pipes bootstrap.
	EncodeBootstrap func(v any) (string, error)
	// Clock is the source of time; nil means SystemClock.
	Clock Clock
	// Abort, when closed (a second signal), stops waiting during teardown;
	// the deletion is still issued.
	Abort <-chan struct{}
	// TeardownTimeout bounds stopping the job and deleting the cluster.
	TeardownTimeout time.Duration
	// StopTimeout bounds stopping the job at teardown: asking Ray and
	// waiting for the job to end (5s once its dashboard stopped answering).
	StopTimeout time.Duration
	// PollInterval spaces status polls.
	PollInterval time.Duration
	// SampleEvery spaces the samples of the nodes' utilization taken
	// while the job runs (Result.Utilization); zero means
	// DefaultSampleEvery, negative none.
	SampleEvery time.Duration
	// NewRunID makes the run id of a standalone step that reaches Run
	// unresolved (see Resolve); nil means random.
	NewRunID func() string
}

// Result describes a finished step, whatever its outcome.
type Result struct {
	// ID is the step's identity and the Ray submission id.
	ID string
	// Attached is true when a previous attempt had submitted the job.
	Attached bool
	// Cluster names the cluster; empty if none was provisioned.
	Cluster string
	// Kept is true when the teardown policy left the cluster running.
	Kept bool
	// DashboardURL is the dashboard shown to people.
	DashboardURL string
	// Job is the last thing Ray said about the job.
	Job JobInfo
	// Durations holds the time spent in each phase that ran.
	Durations map[Phase]time.Duration
	// Utilization summarizes each node's utilization while the job ran,
	// from the samples the runner took; empty when it took none.
	Utilization []NodeUtilization
	// JobTime is the job's run time: Ray's start to end when Ray said,
	// else the run phase's duration (what GPU-hours are counted from).
	JobTime time.Duration
}

// Run runs one step and returns the step's error: nil when the Ray job
// SUCCEEDED, a *JobError, *InfraError or *CancelError otherwise (joined
// with a teardown failure if there was one). Teardown and closing the
// session happen before Run returns, on every path.
func (r *Runner) Run(ctx context.Context, step Step) (Result, error) {
	s, err := r.newState(step)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.fail, s.stepDone = cancel, ctx.Done()
	defer s.recoverTeardown(ctx)
	err = s.lifecycle(ctx)
	err = s.finish(ctx, err)
	return s.result(), err
}

// lifecycle runs the phases up to the job's end; finish does the rest.
func (s *state) lifecycle(ctx context.Context) error {
	s.events.enter(PhaseProvision)
	for _, n := range s.step.Notices {
		s.warn(PhaseProvision, "%s", n)
	}
	s.note(PhaseProvision, "step %s (%s) on %s", s.id, s.step.Kind, s.r.Backend.Name())
	s.startPacking(ctx)
	defer s.dropPackage()
	pctx, stop := s.provisionBound(ctx)
	err := s.phase(pctx, PhaseProvision, s.provision)
	if err == nil {
		err = s.phase(pctx, PhaseDashboard, s.dashboard)
	}
	stop()
	if err != nil {
		return err
	}
	rctx, stop := s.bound(ctx, s.step.RunTimeout, deadline("timeouts.run", s.step.RunTimeout))
	defer stop()
	phases := []struct {
		p  Phase
		fn func(context.Context) error
	}{{PhaseUpload, s.upload}, {PhaseSubmit, s.submit}, {PhaseRun, s.wait}}
	for _, ph := range phases {
		if err := s.phase(rctx, ph.p, ph.fn); err != nil {
			return err
		}
	}
	return nil
}

// phase runs fn as phase p, records its duration and classifies its error.
func (s *state) phase(ctx context.Context, p Phase, fn func(context.Context) error) error {
	s.events.enter(p)
	start := s.clock.Now()
	err := fn(ctx)
	s.record(p, s.clock.Now().Sub(start))
	return classify(ctx, p, err)
}

// bound returns ctx cancelled with cause after d on the runner's clock; a
// zero d means no bound.
func (s *state) bound(ctx context.Context, d time.Duration, cause error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		return ctx, func() { cancel(nil) }
	}
	stop := s.clock.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() { stop(); cancel(nil) }
}

// provisionBound returns ctx bounded by timeouts.provision or, with a
// queue timeout, first by timeouts.queue and, once s.admitted is called,
// by timeouts.provision from then on.
func (s *state) provisionBound(ctx context.Context) (context.Context, func()) {
	prov, queue := s.step.ProvisionTimeout, s.step.QueueTimeout
	if queue <= 0 {
		return s.bound(ctx, prov, deadline("timeouts.provision", prov))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var mu sync.Mutex
	stopClock := s.clock.AfterFunc(queue, func() { cancel(deadline("timeouts.queue", queue)) })
	s.admitted = func() {
		mu.Lock()
		defer mu.Unlock()
		stopClock()
		stopClock = func() bool { return false }
		if prov > 0 {
			stopClock = s.clock.AfterFunc(prov, func() { cancel(deadline("timeouts.provision", prov)) })
		}
	}
	return ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		stopClock()
		cancel(nil)
	}
}

// recoverTeardown tears the cluster down when a phase panicked, then
// re-panics: a bug must not leave a cluster behind.
func (s *state) recoverTeardown(ctx context.Context) {
	p := recover()
	if p == nil {
		return
	}
	if !s.finished {
		s.finish(ctx, &InfraError{Phase: "panic", Err: fmt.Errorf("%v", p)})
	}
	panic(p)
}

// withDefaults returns a copy of r with zero fields filled in.
func (r *Runner) withDefaults() (*Runner, error) {
	if r.Backend == nil || r.Connect == nil {
		return nil, errors.New("runner: Backend and Connect are required")
	}
	c := *r
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	if c.TeardownTimeout <= 0 {
		c.TeardownTimeout = DefaultTeardownTimeout
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.NewRunID == nil {
		c.NewRunID = randomRunID
	}
	return &c, nil
}

// randomRunID returns 16 random hex digits.
func randomRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "standalone-" + hex.EncodeToString(b[:])
}
