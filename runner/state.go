package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// state is one step in progress. Only Run's goroutine touches it, but
// for events, which the backend shares and which locks itself.
type state struct {
	r     *Runner
	util  utilization // the nodes' samples while the job runs
	clock Clock
	step  Step
	id    string // StepID, also the submission id
	runID string
	start time.Time

	fail     context.CancelCauseFunc // cancels the step with a cause
	stepDone <-chan struct{}         // the step's context is done
	// admitted, set while a queue clock runs (Step.QueueTimeout), stops it
	// and starts the provision clock.
	admitted func()

	durations []phaseTime
	cluster   Cluster
	dash      Dashboard
	jobs      Jobs
	pack      *packing // the working dir's package until it is uploaded
	uri       string   // the uploaded working_dir
	submitted bool     // Submit was called: the job may exist
	// submitLost: Submit failed (cancelled in flight, say), yet Ray may have
	// taken the job all the same and register it a moment later.
	submitLost bool
	attached   bool
	info       JobInfo
	kept       bool
	finished   bool
	// dashDown: the dashboard stopped answering while the log was followed
	// (and has not answered since); warnedAt is the outage's length at the
	// last warning.
	dashDown bool
	warnedAt time.Duration
	// gone: the cluster reported that it is gone, the job with it
	// (ErrClusterGone); set from watch's goroutine.
	gone atomic.Bool

	events    *stream                  // every event of the step goes through it
	dagster   *dagsterLog              // tells Dagster the notes and warnings; nil standalone
	relay     *pipes.Relay             // sorts the job's log lines
	outErr    error                    // first failure to write the job's log
	held      []*pipes.Materialization // the driver's, merged per asset key
	driverExc *Exception               // from the driver's own "closed"
	sendErr   error                    // first failure to write to the session
}

type phaseTime struct {
	phase Phase
	d     time.Duration
}

// newState prepares a step: defaults, its resolved identity, relay.
func (r *Runner) newState(step Step) (*state, error) {
	r, err := r.withDefaults()
	if err != nil {
		return nil, err
	}
	if step.Entrypoint == "" {
		return nil, fmt.Errorf("runner: step %q has no entrypoint", step.Name)
	}
	if step.WorkingDir != "" && r.Pack == nil {
		return nil, fmt.Errorf("runner: step %q has a working dir and the Runner no Pack", step.Name)
	}
	step = Resolve(step, r.NewRunID) // a resolved step is only read
	s := &state{
		r:     r,
		clock: r.Clock,
		step:  step,
		runID: step.RunID,
		id:    step.ID,
		start: r.Clock.Now(),
	}
	s.events = &stream{clock: r.Clock, start: s.start, id: s.id}
	if r.Events != nil {
		s.events.sinks = append(s.events.sinks, r.Events)
	}
	if r.Session != nil {
		s.dagster = &dagsterLog{sess: r.Session}
		s.events.sinks = append(s.events.sinks, s.dagster)
	}
	s.relay = s.newRelay()
	return s, nil
}

// record adds a phase's duration (a phase may run more than once).
func (s *state) record(p Phase, d time.Duration) {
	for i := range s.durations {
		if s.durations[i].phase == p {
			s.durations[i].d += d
			return
		}
	}
	s.durations = append(s.durations, phaseTime{p, d})
}

// duration returns the time recorded for p.
func (s *state) duration(p Phase) time.Duration {
	for _, pt := range s.durations {
		if pt.phase == p {
			return pt.d
		}
	}
	return 0
}

// note tells people and Dagster what the step is doing.
func (s *state) note(p Phase, format string, args ...any) {
	s.emit(Event{Phase: p, Kind: KindNote, Message: fmt.Sprintf(format, args...)})
}

// warn reports a problem that does not end the step.
func (s *state) warn(p Phase, format string, args ...any) {
	s.emit(Event{Phase: p, Kind: KindWarning, Message: fmt.Sprintf(format, args...)})
}

// emit tells every consumer of the step's events about e.
func (s *state) emit(e Event) { s.events.Event(e) }

// sendLog writes raystep's own log message to the session. The first
// failure is kept: the step then fails, since Dagster missed something.
func (s *state) sendLog(level pipes.Level, text string) {
	m, err := pipes.LogMessage(level, text)
	if err == nil {
		err = s.r.Session.Send(m)
	}
	if err != nil && s.sendErr == nil {
		s.sendErr = fmt.Errorf("send log to dagster: %w", err)
	}
}

// sendFailure is the first message Dagster could not be sent, nil if none.
func (s *state) sendFailure() error {
	if s.sendErr != nil || s.dagster == nil {
		return s.sendErr
	}
	return s.dagster.failure()
}

// result summarises the step for the caller.
func (s *state) result() Result {
	res := Result{
		ID:           s.id,
		Attached:     s.attached,
		Kept:         s.kept,
		DashboardURL: s.dash.shownURL(),
		Job:          s.info,
		Durations:    map[Phase]time.Duration{},
		Utilization:  s.util.summary(),
		JobTime:      s.jobTime(),
	}
	if s.cluster != nil {
		res.Cluster = s.cluster.Name()
	}
	for _, pt := range s.durations {
		res.Durations[pt.phase] = pt.d
	}
	return res
}
