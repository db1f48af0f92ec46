package runner

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// teardownGrace is how long a teardown call may still run once its bound
// expired or the user aborted, so a deletion already on its way is sent.
const teardownGrace = 5 * time.Second

// finish ends the step on every path: stop the job if it may still run,
// tear the cluster down as the policy says, report the materialization,
// close the session. It runs on a context the caller's cancellation does
// not reach, bounded by TeardownTimeout.
func (s *state) finish(ctx context.Context, err error) error {
	s.finished = true
	if s.outErr != nil {
		s.warn(PhaseRun, "could not write the job's log: %v", s.outErr)
	}
	tctx, cancel := s.teardownContext(ctx)
	defer cancel()
	s.events.enter(PhaseTeardown)
	start := s.clock.Now()
	terr := s.stopJob(tctx)
	terr = errors.Join(terr, s.teardownCluster(tctx, err))
	s.record(PhaseTeardown, s.clock.Now().Sub(start))
	if terr != nil {
		err = errors.Join(err, &InfraError{Phase: PhaseTeardown, Err: terr})
	}
	s.events.enter(PhaseReport)
	s.report(err)
	if serr := s.sendFailure(); err == nil && serr != nil {
		err = &InfraError{Phase: PhaseReport, Err: serr}
	}
	if cerr := s.close(err); err == nil {
		err = cerr
	}
	return err
}

// teardownContext is ctx without its cancellation, bounded by
// TeardownTimeout and cancelled early when Abort closes.
func (s *state) teardownContext(ctx context.Context) (context.Context, func()) {
	cause := fmt.Errorf("teardown took longer than %s", s.r.TeardownTimeout)
	tctx, stop := s.bound(context.WithoutCancel(ctx), s.r.TeardownTimeout, cause)
	tctx, cancel := context.WithCancelCause(tctx)
	done := make(chan struct{})
	if s.r.Abort != nil {
		go func() {
			select {
			case <-s.r.Abort:
				cancel(errors.New("teardown aborted by a second signal"))
			case <-done:
			}
		}()
	}
	return tctx, func() { close(done); cancel(nil); stop() }
}

// lostSubmitPolls is how many polls stopJob looks for a job whose submit
// failed before Ray's answer arrived: Ray may register it a moment later.
const lostSubmitPolls = 10

// downStopTimeout bounds stopping a job whose dashboard stopped answering:
// one more chance, then on to the cluster's teardown (a private head's
// ends the job with the head).
const downStopTimeout = 5 * time.Second

// stopJob stops the Ray job unless it is known to have ended (or went
// with its cluster: ErrClusterGone), and waits a
// little for it to end, within StopTimeout (downStopTimeout when the
// dashboard stopped answering). A job that never existed is fine, but after
// a lost submit "not found" may only mean "not yet", so it asks again a few
// times.
func (s *state) stopJob(ctx context.Context) error {
	if !s.submitted || s.jobs == nil || s.info.Status.Terminal() {
		return nil
	}
	if s.gone.Load() {
		s.note(PhaseTeardown, "job %s ended with its cluster", s.id)
		return nil
	}
	bound := s.r.StopTimeout
	if s.dashDown {
		bound = downStopTimeout
	}
	ctx, stop := s.bound(ctx, bound, fmt.Errorf("job did not stop within %s", bound))
	defer stop()
	stopped, err := s.sendStop(ctx)
	for tries := 0; errors.Is(err, ErrNotFound) && s.submitLost && tries < lostSubmitPolls; tries++ {
		if sleep(ctx, s.clock, s.r.PollInterval) != nil {
			break
		}
		stopped, err = s.sendStop(ctx)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil && s.dashDown:
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		s.warn(PhaseTeardown, "job %s may still run: could not stop it, dashboard %s not answering: %v", s.id, s.dash.URL, err)
		return nil
	case err != nil:
		return fmt.Errorf("stop ray job %s: %w", s.id, err)
	case stopped:
		s.note(PhaseTeardown, "stopping job %s", s.id)
	}
	return s.awaitStopped(ctx)
}

// sendStop asks Ray to stop the job, bounded like every teardown call.
func (s *state) sendStop(ctx context.Context) (stopped bool, err error) {
	err = s.bounded(ctx, func(ctx context.Context) error {
		stopped, err = s.jobs.Stop(ctx, s.id)
		return err
	})
	return stopped, err
}

// awaitStopped polls the job until it ended or ctx ends. A job still
// pending or running is asked to stop again on each poll: Ray answers
// stopped=false for a job whose supervisor does not exist yet, and then
// starts it anyway.
func (s *state) awaitStopped(ctx context.Context) error {
	for {
		info, err := s.jobs.Get(ctx, s.id)
		if err == nil {
			s.info = info
			if info.Status.Terminal() {
				return nil
			}
			_, _ = s.sendStop(ctx)
		}
		if ctx.Err() == nil {
			err = sleep(ctx, s.clock, s.r.PollInterval)
		}
		if ctx.Err() != nil {
			s.warn(PhaseTeardown, "job %s still %s: %v", s.id, s.info.Status, context.Cause(ctx))
			return nil
		}
	}
}

// teardownCluster deletes the cluster or, as the policy says, keeps it.
func (s *state) teardownCluster(ctx context.Context, stepErr error) error {
	if s.cluster == nil {
		return nil
	}
	s.kept = s.step.Teardown.keep(stepErr)
	if r, ok := s.cluster.(OutcomeRecorder); ok && s.info.Status.Terminal() {
		if err := s.bounded(ctx, func(ctx context.Context) error { return r.RecordOutcome(ctx, s.info.Status) }); err != nil {
			s.warn(PhaseTeardown, "note job %s's status %s on cluster %s: %v", s.id, s.info.Status, s.cluster.Name(), err)
		}
	}
	err := s.bounded(ctx, func(ctx context.Context) error { return s.cluster.Teardown(ctx, s.kept) })
	if err != nil {
		return fmt.Errorf("tear down cluster %s: %w", s.cluster.Name(), err)
	}
	if b, ok := s.cluster.(Borrowed); ok && b.Borrowed() && s.gone.Load() {
		s.note(PhaseTeardown, "cluster %s is gone (not owned by this step)", s.cluster.Name())
	} else if ok && b.Borrowed() {
		s.note(PhaseTeardown, "cluster %s left running (not owned by this step)", s.cluster.Name())
	} else if s.kept {
		s.warn(PhaseTeardown, "cluster %s kept (teardown: %s); dashboard %s", s.cluster.Name(), s.step.Teardown, s.dash.shownURL())
	} else {
		s.note(PhaseTeardown, "cluster %s deleted", s.cluster.Name())
	}
	return nil
}

// bounded calls fn and returns its error, or gives up teardownGrace after
// ctx ended if fn ignores ctx: a hanging backend must not hang the step.
func (s *state) bounded(ctx context.Context, fn func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := make(chan struct{})
	stop := s.clock.AfterFunc(teardownGrace, func() { close(grace) })
	defer stop()
	select {
	case err := <-done:
		return err
	case <-grace:
		return fmt.Errorf("gave up waiting: %w", context.Cause(ctx))
	}
}
