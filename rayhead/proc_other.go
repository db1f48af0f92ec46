//go:build !linux

package rayhead

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// procHandle names one process: without pidfds, its pid. (The local
// backend finds a head's processes in /proc, so it runs on Linux only;
// this keeps the package, and the KubeRay backend, building elsewhere.)
type procHandle int

// errProcGone: the process to open has exited.
var errProcGone = errors.New("process gone")

// openProc returns a handle of pid; errProcGone when it has exited.
func openProc(pid int) (procHandle, error) {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return -1, errProcGone
	}
	return procHandle(pid), nil
}

// signal sends sig; a process that exited meanwhile is no error.
func (h procHandle) signal(sig syscall.Signal) error {
	if err := syscall.Kill(int(h), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func (h procHandle) close() {}

// awaitExit waits until no process of hs exists any more, checking every
// poll (50ms when 0). It returns ctx's cause if ctx ends first.
func awaitExit(ctx context.Context, hs []procHandle, poll time.Duration) error {
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for _, h := range hs {
		for !errors.Is(syscall.Kill(int(h), 0), syscall.ESRCH) {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-t.C:
			}
		}
	}
	return nil
}
