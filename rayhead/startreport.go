package rayhead

import (
	"errors"
	"fmt"
	"strings"
)

// startOutput is a failed start attempt's error with the output of `ray
// start` so far. Error shows the output whole: a head that does not start
// at all leaves nothing else of it behind. A retry's warning shows only
// the line of it that tells why (brief).
type startOutput struct {
	err error // what went wrong, without the output
	out string
}

func withOutput(err error, out string) error { return &startOutput{err: err, out: out} }

func (e *startOutput) Error() string { return e.err.Error() + "; output:\n" + e.out }

func (e *startOutput) Unwrap() error { return e.err }

// brief is err without the output it carries, which runs to 16 KB of a
// Python traceback or of dead processes' logs, but with the one line of
// it that tells why: what a person reads in a step that goes on with the
// next attempt.
func brief(err error) string {
	var so *startOutput
	if !errors.As(err, &so) {
		return err.Error()
	}
	msg := so.err.Error()
	if line := tellingLine(so.out); line != "" {
		msg += fmt.Sprintf("; ray start said %q", line)
	}
	return msg
}

// retryWords are what `ray start` says when a new attempt may not meet the
// same fate: a port taken meanwhile, a raylet that registered too late on
// a busy machine.
var retryWords = []string{"already in use", "Failed to bind", "timed out during startup"}

// retryableStart reports whether out, the output of a `ray start` that
// failed, says something a new attempt may not meet (retryWords).
func retryableStart(out string) bool {
	for _, w := range retryWords {
		if strings.Contains(out, w) {
			return true
		}
	}
	return false
}

// tellingLine returns the line of out that says why a start failed: the
// last one with retryWords in it, else the last that says something
// (saysSomething).
func tellingLine(out string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if retryableStart(lines[i]) {
			return strings.TrimSpace(lines[i])
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if saysSomething(lines[i]) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}
