package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// relay sorts the job's log lines: Pipes messages the driver wrote go to
// onMessage, anything else to out unchanged. Lines are handled one at a
// time, so memory stays flat however long the log; Jobs.Tail delivers each
// line once, reconnections included.
type relay struct {
	out       io.Writer
	onMessage func(Message)
	onInvalid func(line string, err error)
	outErr    error // first failure to write out
}

// line handles one log line (without its newline).
func (r *relay) line(l string) {
	m, ok, err := parseMessage(l)
	switch {
	case err != nil:
		r.onInvalid(l, err)
	case ok:
		r.onMessage(m)
	default:
		if _, err := io.WriteString(r.out, l+"\n"); err != nil && r.outErr == nil {
			r.outErr = err
		}
	}
}

// pipesVersionKey marks a JSON line as a Pipes message.
const pipesVersionKey = "__dagster_pipes_version"

// parseMessage recognises a Pipes message the way a log-reading Dagster
// does: a JSON object with a "__dagster_pipes_version" key. ok is false for
// any other line; err is set for a Pipes message without a usable method or
// params.
func parseMessage(line string) (m Message, ok bool, err error) {
	b := bytes.TrimSpace([]byte(line))
	if len(b) == 0 || b[0] != '{' || !bytes.Contains(b, []byte(pipesVersionKey)) {
		return Message{}, false, nil
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(b, &env) != nil {
		return Message{}, false, nil
	}
	if _, has := env[pipesVersionKey]; !has {
		return Message{}, false, nil
	}
	if err := json.Unmarshal(env["method"], &m.Method); err != nil || m.Method == "" {
		return Message{}, true, errors.New(`pipes message without a "method" string`)
	}
	m.Params = env["params"]
	if p := bytes.TrimSpace(m.Params); len(p) == 0 || p[0] != '{' && !bytes.Equal(p, []byte("null")) {
		return Message{}, true, fmt.Errorf("pipes %s message: params must be an object or null", m.Method)
	}
	return m, true, nil
}

// The Pipes methods the runner treats specially.
const (
	methodOpened          = "opened"
	methodClosed          = "closed"
	methodLog             = "log"
	methodMaterialization = "report_asset_materialization"
	methodCheck           = "report_asset_check"
	methodCustom          = "report_custom_message"
	methodExternalStream  = "log_external_stream"
)

// driverMessage handles one Pipes message from the driver: its opened and
// closed belong to the driver's session, not raystep's; materializations
// are held to be merged with raystep's metadata; the rest goes on.
func (s *state) driverMessage(m Message) {
	switch m.Method {
	case methodOpened:
	case methodClosed:
		s.driverClosed(m)
	case methodMaterialization:
		if err := s.hold(m); err != nil {
			s.warn(PhaseRun, "dropped a materialization from the driver: %v", err)
		}
	default:
		s.forward(m)
	}
}

// driverClosed keeps the exception the driver closed its session with.
func (s *state) driverClosed(m Message) {
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
func (s *state) forward(m Message) {
	if s.r.Session == nil {
		s.render(m)
		return
	}
	err := s.r.Session.Send(m)
	switch {
	case errors.Is(err, ErrInvalidMessage):
		s.warn(PhaseRun, "dropped an invalid %s message from the driver: %v", m.Method, err)
	case err != nil && s.sendErr == nil:
		s.sendErr = fmt.Errorf("forward %s to dagster: %w", m.Method, err)
	}
}

// invalidLine reports a Pipes message that cannot be passed on.
func (s *state) invalidLine(line string, err error) {
	s.warn(PhaseRun, "dropped a malformed message from the driver (%v): %s", err, truncate(line, 200))
}

// truncate shortens s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
