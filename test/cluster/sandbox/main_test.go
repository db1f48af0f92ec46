package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentTestEnv makes the test binary act as a sandbox that only waits for
// stopWithParent's signal (TestStopsWhenItsParentEnds).
const parentTestEnv = "SANDBOX_TEST_WAIT_FOR_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(parentTestEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := stopWithParent(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("waiting", os.Getpid())
		<-ctx.Done()
		fmt.Println("told to stop")
		return
	}
	os.Exit(m.Run())
}

// TestStopsWhenItsParentEnds: a sandbox whose parent is killed (a script
// that kills `go run` or its own shell) is told to stop, and so stops
// everything it started, instead of running on with nobody to stop it.
func TestStopsWhenItsParentEnds(t *testing.T) {
	t.Parallel()
	// The parent is a shell that starts the sandbox and waits for it.
	parent := exec.Command("/bin/sh", "-c", `"$0" -test.run=^$ & wait`, os.Args[0])
	parent.Env = append(os.Environ(), parentTestEnv+"=1")
	// A pipe of our own: the sandbox keeps writing to it after its parent
	// is gone, and Cmd.Wait would close a StdoutPipe.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	parent.Stdout = w
	err = parent.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				return "(its output ended)"
			}
			return l
		case <-time.After(time.Minute): // a bound for a broken test, not a measurement
			return "(nothing for a minute)"
		}
	}
	got := next()
	var pid int
	if _, err := fmt.Sscanf(got, "waiting %d", &pid); err != nil {
		parent.Process.Kill()
		t.Fatalf("the sandbox said %q, want waiting PID", got)
	}
	t.Cleanup(func() {
		if t.Failed() { // it may still be waiting
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	if got := next(); !strings.Contains(got, "told to stop") {
		t.Errorf("after its parent was killed the sandbox said %q, want it told to stop", got)
	}
}
