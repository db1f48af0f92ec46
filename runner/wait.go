package runner

import (
	"context"
	"fmt"
	"time"
)

// Bounds of following a job.
const (
	// maxTailFailures is how many broken log streams in a row end the step.
	maxTailFailures = 5
	// maxQuietPolls is how many polls after a finished log stream may still
	// find the job running before the log is followed again.
	maxQuietPolls = 10
)

// wait relays the job's log until the job ends and returns its outcome.
// A broken stream is followed again (the relay skips the lines it already
// passed on); the job's own end is read from its status, not the stream.
func (s *state) wait(ctx context.Context) error {
	failures := 0
	for {
		s.relay.restart()
		err := s.jobs.Tail(ctx, s.id, s.relay.line)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			failures++
			if failures > maxTailFailures {
				return fmt.Errorf("follow the log of job %s: %w", s.id, err)
			}
			s.warn(PhaseRun, "log stream of job %s broke, following it again: %v", s.id, err)
			if err := sleep(ctx, s.clock, backoff(s.r.PollInterval, failures)); err != nil {
				return err
			}
			continue
		}
		failures = 0
		ended, err := s.awaitEnd(ctx)
		if err != nil {
			return err
		}
		if ended {
			return s.outcome()
		}
	}
}

// awaitEnd polls the job's status after its log stream ended. It gives up
// (ended false) when the job keeps running, so the log is followed again.
func (s *state) awaitEnd(ctx context.Context) (ended bool, err error) {
	for range maxQuietPolls {
		info, err := s.jobs.Get(ctx, s.id)
		if err != nil {
			return false, fmt.Errorf("get status of job %s: %w", s.id, err)
		}
		s.info = info
		if info.Status.Terminal() {
			return true, nil
		}
		if err := sleep(ctx, s.clock, s.r.PollInterval); err != nil {
			return false, err
		}
	}
	return false, nil
}

// outcome turns the job's terminal status into the step's error.
func (s *state) outcome() error {
	s.note(PhaseRun, "job %s %s", s.id, s.info.Status)
	if s.info.Status == StatusSucceeded {
		return nil
	}
	return &JobError{
		SubmissionID:   s.id,
		Status:         s.info.Status,
		Message:        s.info.Message,
		DriverExitCode: s.info.DriverExitCode,
		Driver:         s.driverExc,
	}
}

// backoff doubles base per failure, up to 30 times base.
func backoff(base time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < 30*base; i++ {
		d *= 2
	}
	return d
}
