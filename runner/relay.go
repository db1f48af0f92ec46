package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// newRelay sorts the job's log lines with package pipes: the driver's Pipes
// messages go to driverMessage, anything else to Stdout unchanged, and a
// line that looks like a Pipes message but is not a valid one is passed
// through as text with a warning, so no line is ever lost.
func (s *state) newRelay() *pipes.Relay {
	return &pipes.Relay{
		Out:       s.r.Stdout,
		OnMessage: s.driverMessage,
		OnWarning: func(w string) { s.warn(PhaseRun, "driver output: %s", strings.TrimPrefix(w, "pipes relay: ")) },
	}
}

// line relays one log line (without its newline). Lines are handled one at
// a time, so memory stays flat however long the log; Jobs.Tail delivers
// each line once, reconnections included.
func (s *state) line(l string) {
	b := make([]byte, 0, len(l)+1)
	if _, err := s.relay.Write(append(append(b, l...), '\n')); err != nil && s.outErr == nil {
		s.outErr = err
	}
}

// driverMessage handles one Pipes message from the driver: its opened and
// closed belong to the driver's session, not raystep's; materializations
// are held to be merged with raystep's metadata; the rest goes on.
func (s *state) driverMessage(m *pipes.Message) error {
	switch m.Method {
	case pipes.MethodOpened:
	case pipes.MethodClosed:
		s.driverClosed(m)
	case pipes.MethodReportMaterialize:
		if err := s.hold(m); err != nil {
			s.passThrough(m, fmt.Sprintf("passed a materialization from the driver through as text: %v", err))
		}
	default:
		s.forward(m)
	}
	return nil
}

// driverClosed keeps the exception the driver closed its session with.
func (s *state) driverClosed(m *pipes.Message) {
	var p struct {
		Exception *Exception `json:"exception"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Exception == nil {
		return
	}
	fillStacks(p.Exception, 0)
	s.driverExc = p.Exception
}

// fillStacks makes nil stacks empty lists, as Dagster expects.
func fillStacks(e *Exception, depth int) {
	for ; e != nil && depth < 16; depth++ {
		if e.Stack == nil {
			e.Stack = []string{}
		}
		fillStacks(e.Context, depth+1)
		e = e.Cause
	}
}

// forward passes a driver message to Dagster or, standalone, to a person.
// A message Dagster's session refuses is passed through as text.
func (s *state) forward(m *pipes.Message) {
	if s.r.Session == nil {
		s.render(m)
		return
	}
	err := s.r.Session.Send(m)
	switch {
	case errors.Is(err, ErrInvalidMessage):
		s.passThrough(m, fmt.Sprintf("passed a %s message from the driver through as text: %v", m.Method, err))
	case err != nil && s.sendErr == nil:
		s.sendErr = fmt.Errorf("forward %s to dagster: %w", m.Method, err)
	}
}

// passThrough writes a driver message that cannot be passed on to Stdout
// as the line it came as, and warns why.
func (s *state) passThrough(m *pipes.Message, why string) {
	s.warn(PhaseRun, "%s", why)
	line := append(append([]byte(nil), m.Line()...), '\n')
	if _, err := s.r.Stdout.Write(line); err != nil && s.outErr == nil {
		s.outErr = fmt.Errorf("relay plain output: %w", err)
	}
}

// truncate shortens s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
