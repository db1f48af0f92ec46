package pipes

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// Exception is the exception object sent with "closed" when the program
// failed. All five keys are always written.
type Exception struct {
	// Message is the error's text.
	Message string `json:"message"`
	// Stack is the stack trace, one frame (or, for a panic, one line of
	// the goroutine's stack) per entry, shown by Dagster as written.
	Stack []string `json:"stack"`
	// Name is the error's type (Python's class name), e.g. *fs.PathError
	// or panic(string); nil if unknown.
	Name *string `json:"name"`
	// Cause is the error that led to this one (Python's __cause__; for Go,
	// the wrapped error).
	Cause *Exception `json:"cause"`
	// Context is the error being handled when this one happened (Python's
	// __context__); raystep sends nil.
	Context *Exception `json:"context"`
}

// ExceptionFromError describes err: its message, its Go type as the name, the
// caller's stack, and the wrapped error (errors.Unwrap) as the cause.
func ExceptionFromError(err error) *Exception {
	if err == nil {
		return nil
	}
	e := exceptionChain(err, 0)
	e.Stack = callerStack(3)
	return e
}

func exceptionChain(err error, depth int) *Exception {
	name := fmt.Sprintf("%T", err)
	e := &Exception{Message: err.Error(), Stack: []string{}, Name: &name}
	if next := errors.Unwrap(err); next != nil && depth < 16 {
		e.Cause = exceptionChain(next, depth+1)
	}
	return e
}

// ExceptionFromPanic describes a recovered panic value with the stack of the
// panicking goroutine (pass debug.Stack() taken inside the deferred recover).
func ExceptionFromPanic(v any, stack []byte) *Exception {
	name := "panic"
	msg := fmt.Sprint(v)
	if err, ok := v.(error); ok {
		name = fmt.Sprintf("panic(%T)", err)
	} else {
		name = fmt.Sprintf("panic(%T)", v)
	}
	lines := strings.Split(strings.TrimRight(string(stack), "\n"), "\n")
	return &Exception{Message: msg, Stack: lines, Name: &name}
}

func callerStack(skip int) []string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(skip, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	out := []string{}
	for {
		f, more := frames.Next()
		out = append(out, fmt.Sprintf("  File %q, line %d, in %s\n", f.File, f.Line, f.Function))
		if !more {
			break
		}
	}
	return out
}
