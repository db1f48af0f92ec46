// Command raystep runs a Ray job as a Dagster Pipes step: it validates a job
// spec, brings up an ephemeral Ray cluster, submits the entrypoint, relays its
// logs and metrics to Dagster and always tears the cluster down.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/raystep/raystep/fleet"
)

func main() {
	ctx, stop := signalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// signalContext returns a context cancelled by the first SIGINT, SIGTERM or
// SIGHUP (a closed terminal or SSH session), with a *signalError cause that
// names the signal so the exit code can tell 130, 143 and 129 apart. A
// second signal closes the context's abort channel (see fleet.Abort): teardown
// then stops waiting.
func signalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	abort, quit := make(chan struct{}), make(chan struct{})
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// Asking for SIGPIPE (and dropping it) makes a write to a closed
	// stdout or stderr fail with EPIPE instead of killing raystep before
	// its teardown: the SSH session that sent SIGHUP is gone.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	go func() {
		select {
		case sig := <-ch:
			cancel(&signalError{sig: sig})
		case <-quit:
			return
		}
		select {
		case <-ch:
			close(abort)
		case <-quit:
		}
	}()
	return fleet.WithAbort(ctx, abort), func() {
		signal.Stop(ch)
		signal.Stop(pipe)
		close(quit)
		cancel(context.Canceled)
	}
}
