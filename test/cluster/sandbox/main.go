// Command sandbox runs raystep's test Kubernetes environment for people and
// scripts: a real control plane, scheduler and garbage collector, kwok
// nodes standing in for GPU pools, the real KubeRay operator and a real
// local Ray head. It writes a kubeconfig and an env file into a directory
// it prints, runs until SIGINT or SIGTERM, then stops everything it
// started. `make sandbox` runs it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
