package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// Exit codes, the only ones raystep returns.
const (
	exitOK             = 0   // the Ray job SUCCEEDED (or the command did its work)
	exitJobFailed      = 1   // the Ray job FAILED or was STOPPED
	exitUsage          = 2   // bad usage or invalid spec: nothing was created
	exitInfrastructure = 3   // API server, dashboard, provisioning, deadline
	exitPreempted      = 75  // the cluster lost a pod to preemption or eviction: retry (EX_TEMPFAIL)
	exitSIGHUP         = 129 // cancelled by SIGHUP (terminal closed), after teardown
	exitSIGINT         = 130 // cancelled by SIGINT, after teardown
	exitSIGTERM        = 143 // cancelled by SIGTERM, after teardown
)

// exitCodes says what each exit code but 0 means, in the words run's help
// prints and the Dagster resource's EXIT_CODES repeats (a test keeps the
// two equal).
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitJobFailed, "the Ray job FAILED or was STOPPED"},
	{exitUsage, "bad usage or an invalid spec; nothing was created"},
	{exitInfrastructure, "infrastructure failure (cluster, dashboard, provisioning or deadline)"},
	{exitPreempted, "preempted: the cluster lost a pod to preemption, eviction or node loss while the job ran; worth a retry"},
	{exitSIGHUP, "cancelled by SIGHUP, after teardown"},
	{exitSIGINT, "cancelled by SIGINT, after teardown"},
	{exitSIGTERM, "cancelled by SIGTERM, after teardown"},
}

// exitCodesHelp is exitCodes as a paragraph of help text.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n  0    the Ray job SUCCEEDED (or the command did its work)")
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "\n  %-4d %s", c.code, c.meaning)
	}
	return b.String()
}

// signalError is the cause main gives the context when a signal arrives.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "received " + e.sig.String() }

// usageError marks bad flags or arguments.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitRules is the table from errors to exit codes, checked in order: a
// signal wins over the job outcome it interrupted, and an unknown error is
// an infrastructure failure.
var exitRules = []struct {
	code  int
	match func(error) bool
}{
	{exitUsage, func(err error) bool { return asType[*usageError](err) }},
	{exitUsage, func(err error) bool { return asType[*schemas.ValidationErrors](err) }},
	{exitUsage, func(err error) bool { return errors.Is(err, fleet.ErrUsage) }},
	{exitUsage, func(err error) bool { return errors.Is(err, fleet.ErrNotFound) }},
	{exitUsage, func(err error) bool { return errors.Is(err, notebook.ErrNone) }},
	{exitPreempted, func(err error) bool { return errors.Is(err, runner.ErrPreempted) }},
	{exitJobFailed, func(err error) bool {
		return errors.Is(err, runner.ErrJobFailed) || errors.Is(err, runner.ErrJobStopped)
	}},
	{exitInfrastructure, func(err error) bool { return errors.Is(err, runner.ErrInfrastructure) }},
}

// exitCode chooses the process exit code for the error a command returned,
// in the one place raystep does so. ctx's cause names the signal, if any.
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	if code, ok := signalCode(context.Cause(ctx)); ok {
		return code
	}
	if code, ok := signalCode(err); ok {
		return code
	}
	for _, r := range exitRules {
		if r.match(err) {
			return r.code
		}
	}
	return exitInfrastructure
}

// signalCode maps a *signalError found in err to 128+signal.
func signalCode(err error) (int, bool) {
	var se *signalError
	if err == nil || !errors.As(err, &se) {
		return 0, false
	}
	switch se.sig {
	case syscall.SIGTERM:
		return exitSIGTERM, true
	case syscall.SIGHUP:
		return exitSIGHUP, true
	}
	return exitSIGINT, true
}

func asType[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}
