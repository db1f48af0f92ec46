// Command sandbox runs raystep's test Kubernetes environment for people and
// scripts: a real control plane, scheduler and garbage collector, kwok
// nodes standing in for GPU pools, the real KubeRay operator and a real
// local Ray head. It writes a kubeconfig and an env file into a directory
// it prints, runs until SIGINT, SIGTERM or SIGHUP (a closed terminal), or
// until the process that started it is gone, then stops everything it
// started. `make sandbox` runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	if err := stopWithParent(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stopWithParent asks the kernel for a SIGTERM when the process that
// started the sandbox ends. A script that kills `go run` (which does not
// pass signals on) or its own shell would otherwise leave the control
// plane, the operator and the Ray head running with nobody to stop them.
func stopWithParent() error {
	parent := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("ask for a signal when the parent ends: %w", err)
	}
	if os.Getppid() != parent { // it ended before the request was made
		return fmt.Errorf("the process that started the sandbox (pid %d) is gone", parent)
	}
	return nil
}
