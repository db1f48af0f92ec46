package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// state is one step in progress. Only Run's goroutine touches it.
type state struct {
	r     *Runner
	clock Clock
	step  Step
	id    string // StepID, also the submission id
	runID string
	start time.Time

	fail     context.CancelCauseFunc // cancels the step with a cause
	stepDone <-chan struct{}         // the step's context is done

	durations []phaseTime
	cluster   Cluster
	dash      Dashboard
	jobs      Jobs
	uri       string // the uploaded working_dir
	submitted bool   // Submit was called: the job may exist
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

	relay     *relay
	held      []*materialization // the driver's, merged per asset key
	driverExc *Exception         // from the driver's own "closed"
	sendErr   error              // first failure to write to the session
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
	step = Resolve(step, r.NewRunID) // a resolved step is only read
	s := &state{
		r:     r,
		clock: r.Clock,
		step:  step,
		runID: step.RunID,
		id:    step.ID,
		start: r.Clock.Now(),
	}
	s.relay = &relay{out: r.Stdout, onMessage: s.driverMessage, onInvalid: s.invalidLine}
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
	s.say(p, "INFO", fmt.Sprintf(format, args...))
}

// warn reports a problem that does not end the step.
func (s *state) warn(p Phase, format string, args ...any) {
	s.say(p, "WARNING", fmt.Sprintf(format, args...))
}

// say writes a phase line to Progress and a log message to the session.
func (s *state) say(p Phase, level, text string) {
	if s.r.Progress != nil {
		tag := string(p)
		if level == "WARNING" {
			tag += " !"
		}
		s.progress(tag, text)
	}
	if s.r.Session != nil {
		s.send("log", map[string]any{"message": fmt.Sprintf("raystep %s: %s", p, text), "level": level})
	}
}

// progress writes one human line with the elapsed time.
func (s *state) progress(tag, text string) {
	elapsed := s.clock.Now().Sub(s.start).Seconds()
	fmt.Fprintf(s.r.Progress, "[%7.1fs] %-10s %s\n", elapsed, tag, text)
}

// send writes raystep's own message to the session. The first failure is
// kept: the step then fails, since Dagster missed something.
func (s *state) send(method string, params any) {
	raw, err := json.Marshal(params)
	if err == nil {
		err = s.r.Session.Send(Message{Method: method, Params: raw})
	}
	if err != nil && s.sendErr == nil {
		s.sendErr = fmt.Errorf("send %s to dagster: %w", method, err)
	}
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
	}
	if s.cluster != nil {
		res.Cluster = s.cluster.Name()
	}
	for _, pt := range s.durations {
		res.Durations[pt.phase] = pt.d
	}
	return res
}
