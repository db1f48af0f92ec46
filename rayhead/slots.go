package rayhead

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// Starting a Ray head is the costly part of its life: gcs_server, the
// raylet and a dozen Python processes (the dashboard and its modules, the
// agents) start at once, and Ray gives some of them fixed windows (30 s
// for the raylet to register, which raystep cannot change). Many heads
// starting together on a small machine (a Dagster run's parallel steps, a
// test suite) starve each other past those windows and fail. One start
// alone keeps about one and a half cores busy: on a 2-core machine, idle,
// `ray start --head` took 11 to 13 s and 16 to 20 CPU-seconds, and two at
// once 25 to 31 s (test/bench/head_start.sh). So at most
// StartSlots heads start at once on one machine, across every raystep
// process: a start takes one of StartSlots lock files under slotRoot and
// holds it until its head is ready or has failed; the others wait their
// turn, which their caller's context bounds.

// startSlotsEnv overrides the number of heads that may start at once.
const startSlotsEnv = "RAYSTEP_HEAD_STARTS"

// StartSlots is how many heads may start at once on this machine:
// $RAYSTEP_HEAD_STARTS when it is a positive number, else one per two
// CPUs (at least one).
func StartSlots() int {
	if n, err := strconv.Atoi(os.Getenv(startSlotsEnv)); err == nil && n > 0 {
		return n
	}
	return max(1, runtime.NumCPU()/2)
}

// slotRoot holds the slots' lock files: one place on the machine, whatever
// temp root the heads use, so that every start on it takes its turn.
const slotRoot = tempRoot

// slotPoll is how often a start that waits for a slot looks again.
const slotPoll = 100 * time.Millisecond

// takeStartSlot waits until one of n slots under root is free and takes
// it; release gives it back. waited says whether it had to wait. A slot
// file it cannot open (another user's, a read-only root) does not hold
// the start back: the limit is a courtesy between raystep processes, not
// a lock anything depends on.
func takeStartSlot(ctx context.Context, root string, n int) (release func(), waited bool, err error) {
	files := make([]*os.File, 0, n)
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	for i := range n {
		f, err := os.OpenFile(filepath.Join(root, fmt.Sprintf("raystep-head-start.%d.lock", i)), os.O_RDONLY|os.O_CREATE, 0o644)
		if err != nil {
			return func() {}, false, nil
		}
		files = append(files, f)
	}
	tick := time.NewTicker(slotPoll)
	defer tick.Stop()
	for {
		for i, f := range files {
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
				files = append(files[:i], files[i+1:]...) // kept open: the lock lives with it
				return func() { _ = f.Close() }, waited, nil
			}
		}
		waited = true
		select {
		case <-ctx.Done():
			return func() {}, waited, fmt.Errorf("wait for another ray head on this machine to finish starting (%d start at once; %s sets how many): %w",
				n, startSlotsEnv, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
