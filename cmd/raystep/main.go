// Command raystep runs a Ray job as a Dagster Pipes step: it validates a job
// spec, brings up an ephemeral Ray cluster, submits the entrypoint, relays its
// logs and metrics to Dagster and always tears the cluster down.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM,
// with a *signalError cause that names the signal so the exit code can tell
// 130 from 143.
func signalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			cancel(&signalError{sig: sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}
