package fleet

import (
	"errors"
	"fmt"
)

// ErrNotFound is what every backend's error about a name that is no
// cluster of the kind asked for is to errors.Is (down, dashboard,
// notebook, run --cluster): the user's mistake, exit 2, nothing done.
var ErrNotFound = errors.New("no such cluster")

// NotFound returns an error that reads msg and is ErrNotFound to
// errors.Is: a backend's own sentinel for a name it does not have.
func NotFound(msg string) error { return notFound(msg) }

type notFound string

func (e notFound) Error() string        { return string(e) }
func (e notFound) Is(target error) bool { return target == ErrNotFound }

// ErrUsage is what every backend's error about how a command was asked
// (a flag it has no use for, a name that cannot be a cluster's) is to
// errors.Is: the user's mistake, exit 2 with a pointer to the help,
// nothing done.
var ErrUsage = errors.New("usage")

// BadName returns an error that reads msg and is ErrUsage to errors.Is:
// a name that cannot be a cluster's on the backend.
func BadName(msg string) error { return badName(msg) }

type badName string

func (e badName) Error() string        { return string(e) }
func (e badName) Is(target error) bool { return target == ErrUsage }

// UnsupportedError is a flag that has no meaning on the backend asked
// for: the user's mistake, exit 2, nothing done.
type UnsupportedError struct {
	// Command and Flag are what was asked ("down", "--namespace").
	Command, Flag string
	// Backend is the backend that has no use for it.
	Backend string
	// Hint says what to do instead.
	Hint string
}

// Is makes the error ErrUsage to errors.Is.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUsage }

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: %s has no meaning on the %s backend: %s", e.Command, e.Flag, e.Backend, e.Hint)
}

// Usage returns an error that reads msg and is ErrUsage to errors.Is: a
// request no backend can do as asked.
func Usage(msg string) error { return badName(msg) }

// AsUsage returns err, still itself to errors.Is and errors.As, that is
// also ErrUsage: the user's mistake, found by a backend.
func AsUsage(err error) error { return usage{err} }

type usage struct{ err error }

func (e usage) Error() string        { return e.err.Error() }
func (e usage) Unwrap() error        { return e.err }
func (e usage) Is(target error) bool { return target == ErrUsage }
