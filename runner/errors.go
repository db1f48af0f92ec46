package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Outcomes a caller branches on with errors.Is to choose the exit code.
// When several apply (a failed job whose teardown failed too), Run joins
// them: check ErrCancelled first, then the job outcomes, then
// ErrInfrastructure.
var (
	// ErrJobFailed: the Ray job ended FAILED (exit 1). See JobError.
	ErrJobFailed = errors.New("ray job failed")
	// ErrJobStopped: the Ray job ended STOPPED by someone else (exit 1).
	ErrJobStopped = errors.New("ray job stopped")
	// ErrPreempted: the step's cluster lost a pod to a disruption after
	// it ran (scheduler or Kueue preemption, eviction, node loss): a
	// failure worth retrying on a new cluster, wrapped in an InfraError.
	ErrPreempted = errors.New("preempted")
	// ErrInfrastructure: raystep's machinery failed: provisioning, the
	// dashboard, the log stream, teardown, a deadline (exit 3). See InfraError.
	ErrInfrastructure = errors.New("infrastructure failure")
	// ErrDeadline: timeouts.provision or timeouts.run expired (exit 3);
	// always wrapped in an InfraError.
	ErrDeadline = errors.New("deadline exceeded")
	// ErrCancelled: the caller's context was cancelled (SIGINT, SIGTERM);
	// the CancelError carries context.Cause, which tells the signal.
	ErrCancelled = errors.New("step cancelled")
)

// JobError reports a Ray job that ended FAILED or STOPPED.
type JobError struct {
	// SubmissionID is the job's submission id.
	SubmissionID string
	// Status is FAILED or STOPPED.
	Status JobStatus
	// Message is Ray's explanation.
	Message string
	// DriverExitCode is the driver's exit code when Ray knows it.
	DriverExitCode *int
	// Driver is the exception the driver sent with its own Pipes "closed"
	// message (its Python traceback), if any.
	Driver *Exception
}

// Error describes the job's end.
func (e *JobError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ray job %s %s", e.SubmissionID, e.Status)
	if msg := summarize(e.Message); msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	if e.DriverExitCode != nil {
		fmt.Fprintf(&b, " (driver exit code %d)", *e.DriverExitCode)
	}
	return b.String()
}

// summarize shortens Ray's message, which may end with the last 20,000
// characters of the log (already relayed), to its first line and the log's
// last line of the driver's, usually its exception. Ray's own line that
// opens the log ("Running entrypoint for job ...") is not the driver's:
// on a busy machine it can land after the driver's last words.
func summarize(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	first := strings.TrimSpace(lines[0])
	for i := len(lines) - 1; i > 0; i-- {
		if last := strings.TrimSpace(lines[i]); last != "" && !strings.HasPrefix(last, "Running entrypoint for job ") {
			return first + " " + last
		}
	}
	return first
}

// Is matches ErrJobFailed or ErrJobStopped by status.
func (e *JobError) Is(target error) bool {
	return target == ErrJobFailed && e.Status == StatusFailed ||
		target == ErrJobStopped && e.Status == StatusStopped
}

// InfraError reports a failure of raystep's machinery during a phase.
type InfraError struct {
	// Phase is where it happened.
	Phase Phase
	// Err is the cause.
	Err error
}

// Error names the phase and the cause.
func (e *InfraError) Error() string { return fmt.Sprintf("%s: %v", e.Phase, e.Err) }

// Unwrap returns the cause.
func (e *InfraError) Unwrap() error { return e.Err }

// Is matches ErrInfrastructure.
func (e *InfraError) Is(target error) bool { return target == ErrInfrastructure }

// CancelError reports a step cancelled by its caller during a phase.
type CancelError struct {
	// Phase is where the step was when cancelled.
	Phase Phase
	// Cause is context.Cause of the caller's context (e.g. the signal).
	Cause error
}

// Error names the phase and the cause.
func (e *CancelError) Error() string {
	return fmt.Sprintf("cancelled during %s: %v", e.Phase, e.Cause)
}

// Unwrap returns the cause, so errors.As finds the caller's signal error.
func (e *CancelError) Unwrap() error { return e.Cause }

// Is matches ErrCancelled.
func (e *CancelError) Is(target error) bool { return target == ErrCancelled }

// deadline returns the cause a context is cancelled with when timeout,
// named by its spec field, expires; classify fills in the phase.
func deadline(field string, timeout time.Duration) error {
	return &InfraError{Err: fmt.Errorf("%w: %s %s", ErrDeadline, field, timeout)}
}

// classify turns what a phase returned under ctx into the step's error:
// job outcomes stay as they are; a cancelled ctx becomes the cause it was
// cancelled with (a deadline or an infrastructure failure, already an
// InfraError) or a CancelError when the caller cancelled; anything else is
// an InfraError of the phase.
func classify(ctx context.Context, phase Phase, err error) error {
	if err == nil {
		return nil
	}
	var je *JobError
	if errors.As(err, &je) {
		return err
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		var ie *InfraError
		if errors.As(cause, &ie) {
			if ie.Phase == "" {
				return &InfraError{Phase: phase, Err: ie.Err}
			}
			return ie
		}
		return &CancelError{Phase: phase, Cause: cause}
	}
	var ie *InfraError
	if errors.As(err, &ie) {
		return err
	}
	return &InfraError{Phase: phase, Err: err}
}

// exceptionFor describes the step's error for the "closed" message. A failed
// job carries the driver's own exception as the cause.
func exceptionFor(err error) *Exception {
	if err == nil {
		return nil
	}
	exc := &Exception{Name: errorName(err), Message: err.Error(), Stack: []string{}}
	var je *JobError
	if errors.As(err, &je) && je.Driver != nil {
		exc.Cause = je.Driver
	}
	return exc
}

// errorName names err's kind the way the exit code table does.
func errorName(err error) string {
	switch {
	case errors.Is(err, ErrCancelled):
		return "StepCancelled"
	case errors.Is(err, ErrJobFailed):
		return "RayJobFailed"
	case errors.Is(err, ErrJobStopped):
		return "RayJobStopped"
	case errors.Is(err, ErrDeadline):
		return "DeadlineExceeded"
	case errors.Is(err, ErrInfrastructure):
		return "InfrastructureError"
	default:
		return "RaystepError"
	}
}
