package rayhead

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procHandle names one process for as long as it is open: a pidfd, so a
// pid reused after the process exited is never signalled, and its exit
// can be awaited by poll even when it is not this process's child.
type procHandle int

// errProcGone: the process to open has exited.
var errProcGone = errors.New("process gone")

// openProc opens a handle of pid; errProcGone when it has exited.
func openProc(pid int) (procHandle, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, errProcGone
	}
	if err != nil {
		return -1, err
	}
	return procHandle(fd), nil
}

// signal sends sig; a process that exited meanwhile is no error.
func (h procHandle) signal(sig syscall.Signal) error {
	if err := unix.PidfdSendSignal(int(h), sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

func (h procHandle) close() { _ = unix.Close(int(h)) }

// awaitExit waits until every process of hs has exited (its pidfd turns
// readable), checking ctx every poll (50ms when 0). It returns ctx's
// cause if ctx ends first.
func awaitExit(ctx context.Context, hs []procHandle, poll time.Duration) error {
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	pfds := make([]unix.PollFd, 0, len(hs))
	for _, h := range hs {
		pfds = append(pfds, unix.PollFd{Fd: int32(h), Events: unix.POLLIN})
	}
	for len(pfds) > 0 {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		n, err := unix.Poll(pfds, int(poll.Milliseconds()))
		if errors.Is(err, unix.EINTR) || n == 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfds: %w", err)
		}
		waiting := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				waiting = append(waiting, p)
			}
		}
		pfds = waiting
	}
	return nil
}
