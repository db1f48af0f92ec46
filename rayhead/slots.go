package rayhead

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
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
// turn, which their caller's context bounds. Turns go in the order the
// starts came (a queue of ticket files beside the slots): without it a
// start that came first could wait while later ones went ahead, for
// minutes when a Dagster run's steps or a test suite start many heads.

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

// slotRoot holds the slots' lock files, in a directory of each user's
// (slotDir): one place on the machine, whatever temp root the heads use,
// so that every start of the user's takes its turn.
const slotRoot = tempRoot

// slotDir is the directory of the calling user's start slots under root,
// root/raystep-UID, made 0700. It is refused unless it is a directory (not
// a link) of this user's that nobody else may write: in a world-writable
// /tmp another user could have made it first, or made the slot files
// there and held their locks, and kept this user's heads from starting.
func slotDir(root string) (string, error) {
	dir := filepath.Join(root, fmt.Sprintf("raystep-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if err := ownDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// ownDir fails unless dir is a directory, not a link, owned by the
// calling user and writable by nobody else.
func ownDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is not a directory of user %d's that only they may write", dir, os.Getuid())
	}
	return nil
}

// slotPoll is how often a start that waits for a slot looks again.
const slotPoll = 100 * time.Millisecond

// takeStartSlot waits until one of n slots in the user's slotDir under
// root is free and takes it; release gives it back. waited says whether it
// had to wait. A slot dir or file it cannot use (another user's, a
// read-only root) does not hold the start back: the limit is a courtesy
// between raystep processes, not a lock anything depends on.
func takeStartSlot(ctx context.Context, root string, n int) (release func(), waited bool, err error) {
	root, err = slotDir(root)
	if err != nil {
		return func() {}, false, nil
	}
	files := make([]*os.File, 0, n)
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	for i := range n {
		f, err := os.OpenFile(filepath.Join(root, fmt.Sprintf("head-start.%d.lock", i)), os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return func() {}, false, nil
		}
		files = append(files, f)
	}
	turn := joinQueue(root)
	defer turn.leave()
	tick := time.NewTicker(slotPoll)
	defer tick.Stop()
	for {
		// A start tries the slots only while fewer starts than there are
		// slots came before it and still wait: one of those would
		// otherwise lose its turn to it.
		if turn.ahead() < n {
			for i, f := range files {
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
					files = append(files[:i], files[i+1:]...) // kept open: the lock lives with it
					return func() { _ = f.Close() }, waited, nil
				}
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

// A ticket is a start's place in the queue for the slots: a file in the
// slot dir named by when the start came, which the start holds locked
// for as long as it waits. A ticket whose lock is free belongs to a
// process that is gone; whoever meets it removes it.
type ticket struct {
	dir  string
	name string
	file *os.File // nil: the start could not queue, and waits in no order
}

// ticketPrefix begins every ticket's name; the rest sorts in the order
// the starts came.
const ticketPrefix = "ticket."

// tickets numbers this process's tickets, which may come in the same
// nanosecond.
var tickets atomic.Int64

// joinQueue puts a ticket for a start in dir's queue. The ticket is
// locked before it takes its name, so that nobody finds it free and takes
// it for a dead one's.
func joinQueue(dir string) *ticket {
	f, err := os.CreateTemp(dir, joiningPrefix)
	if err != nil {
		return &ticket{}
	}
	name := fmt.Sprintf("%s%020d.%d.%d", ticketPrefix, time.Now().UnixNano(), os.Getpid(), tickets.Add(1))
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil ||
		os.Rename(f.Name(), filepath.Join(dir, name)) != nil {
		_ = os.Remove(f.Name())
		_ = f.Close()
		return &ticket{}
	}
	return &ticket{dir: dir, name: name, file: f}
}

// ahead counts the starts that came before t and still wait, and removes
// the tickets of those whose process is gone.
func (t *ticket) ahead() int {
	if t.file == nil {
		return 0
	}
	entries, err := os.ReadDir(t.dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasPrefix(name, ticketPrefix):
			if name < t.name && waiting(filepath.Join(t.dir, name)) {
				n++
			}
		case strings.HasPrefix(name, joiningPrefix):
			removeAbandoned(filepath.Join(t.dir, name))
		}
	}
	return n
}

// joiningPrefix begins the name of a ticket not yet locked and named.
const joiningPrefix = "joining."

// abandonedAfter is how old a ticket that never got its name must be
// before it counts as left by a process killed while it made it: making
// one takes microseconds.
const abandonedAfter = time.Minute

// removeAbandoned removes the unnamed ticket at path if nobody holds it
// and it is older than abandonedAfter.
func removeAbandoned(path string) {
	fi, err := os.Lstat(path)
	if err != nil || time.Since(fi.ModTime()) < abandonedAfter {
		return
	}
	waiting(path) // removes it unless it is held
}

// waiting reports whether the ticket at path is held by a start that
// waits; one nobody holds is removed.
func waiting(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false // gone meanwhile: its start took a slot or gave up
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil {
		return true
	}
	_ = os.Remove(path)
	return false
}

// leave takes t out of the queue: its start took a slot or gave up.
func (t *ticket) leave() {
	if t.file == nil {
		return
	}
	_ = os.Remove(filepath.Join(t.dir, t.name))
	_ = t.file.Close()
}
