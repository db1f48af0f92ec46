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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
