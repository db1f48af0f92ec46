// Command maxrss runs a command and writes its peak RSS in KiB to a file:
// maxrss OUT CMD [ARG]... It exits with the command's exit code.
//
// The tests need it because a child's rusage counts the peak RSS of the
// process that started it (Go starts children with vfork, sharing its
// memory until exec): started from this small program, the command's
// figure is its own.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: maxrss OUT CMD [ARG]...")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "maxrss:", err)
		os.Exit(2)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	if err := os.WriteFile(os.Args[1], fmt.Appendf(nil, "%d\n", rss), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "maxrss:", err)
		os.Exit(2)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
