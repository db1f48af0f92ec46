package runner

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Bounds of following a job.
const (
	// maxQuietPolls is how many polls after the job's log ended may still
	// find the job running before the step fails.
	maxQuietPolls = 10
	// outageNoticeEvery spaces the warnings about a dashboard that stopped
	// answering.
	outageNoticeEvery = 30 * time.Second
)

// wait relays the job's log until the job ends and returns its outcome.
// Tail owns reconnecting and the log's de-duplication; wait tells people
// when the dashboard stops answering and when it answers again. The job's
// own end is read from its status, not the stream.
func (s *state) wait(ctx context.Context) error {
	stop := s.sampleNodes(ctx)
	err := s.jobs.Tail(ctx, s.id, s.line, s.outage)
	stop()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		s.dashDown = errors.Is(err, ErrUnreachable)
		return fmt.Errorf("relay the job's log: %w", err)
	}
	return s.awaitEnd(ctx)
}

// outage tells people about a dashboard that stopped answering: at the
// first failed try, then every outageNoticeEvery, and when it answers again.
func (s *state) outage(o Outage) {
	if o.Err == nil {
		if s.dashDown {
			s.note(PhaseRun, "dashboard %s answers again after %s; following the log of job %s", s.dash.URL, wholeSeconds(o.For), s.id)
		}
		s.dashDown = false
		return
	}
	if s.dashDown && o.For < s.warnedAt+outageNoticeEvery {
		return
	}
	s.dashDown, s.warnedAt = true, o.For
	s.warn(PhaseRun, "dashboard %s stopped answering (%s); still trying, %s so far, giving up after %s",
		s.dash.URL, reason(o.Err), wholeSeconds(o.For), o.Limit)
}

// wholeSeconds rounds d to whole seconds, at least one.
func wholeSeconds(d time.Duration) time.Duration { return max(d.Round(time.Second), time.Second) }

// reason says in a few words why the dashboard did not answer.
func reason(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	return truncate(err.Error(), 120)
}

// awaitEnd polls the job's status after its log ended, until it is terminal.
func (s *state) awaitEnd(ctx context.Context) error {
	for range maxQuietPolls {
		info, err := s.jobs.Get(ctx, s.id)
		if err != nil {
			return fmt.Errorf("get status of job %s: %w", s.id, err)
		}
		s.info = info
		if info.Status.Terminal() {
			return s.outcome()
		}
		if err := sleep(ctx, s.clock, s.r.PollInterval); err != nil {
			return err
		}
	}
	return fmt.Errorf("the log of job %s ended, but Ray still says it is %s", s.id, s.info.Status)
}

// outcome turns the job's terminal status into the step's error.
func (s *state) outcome() error {
	s.note(PhaseRun, "job %s %s", s.id, s.info.Status)
	if s.info.Status == StatusSucceeded {
		return nil
	}
	if d, ok := s.cluster.(Disrupted); ok {
		if err := d.Disruption(); err != nil { // the job failed because its cluster lost a pod
			return &InfraError{Phase: PhaseRun, Err: fmt.Errorf("job %s %s after its cluster was disrupted: %w", s.id, s.info.Status, err)}
		}
	}
	return &JobError{
		SubmissionID:   s.id,
		Status:         s.info.Status,
		Message:        s.info.Message,
		DriverExitCode: s.info.DriverExitCode,
		Driver:         s.driverExc,
	}
}
