package rayhead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartSlotsTakeTurns: with one slot, a second start waits until the
// first is done with it; with two, both go at once; a wait ends with its
// context and says what it waited for.
func TestStartSlotsTakeTurns(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	release, waited, err := takeStartSlot(ctx, root, 1)
	if err != nil || waited {
		t.Fatalf("first start: waited %v, %v; want the free slot at once", waited, err)
	}
	second := make(chan bool, 1)
	go func() {
		r, waited, err := takeStartSlot(ctx, root, 1)
		if err != nil {
			t.Errorf("second start: %v", err)
		}
		r()
		second <- waited
	}()
	short, cancelShort := context.WithTimeout(ctx, 3*slotPoll)
	_, _, err = takeStartSlot(short, root, 1)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), startSlotsEnv) {
		t.Errorf("a start whose context ends while the slot is taken: %v, want the deadline and a hint at %s", err, startSlotsEnv)
	}
	select {
	case <-second:
		t.Fatal("the second start took the slot the first still holds")
	default:
	}
	release()
	select {
	case waited := <-second:
		if !waited {
			t.Errorf("the second start says it did not wait")
		}
	case <-ctx.Done():
		t.Fatal("the second start did not get the slot the first gave back")
	}

	a, waitedA, errA := takeStartSlot(ctx, root, 2)
	b, waitedB, errB := takeStartSlot(ctx, root, 2)
	if errA != nil || errB != nil || waitedA || waitedB {
		t.Errorf("two starts with two slots: waited %v %v, %v %v; want both at once", waitedA, waitedB, errA, errB)
	}
	a()
	b()
}

func TestStartSlotsFromTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want int
	}{{"3", 3}, {"", max(1, runtime.NumCPU()/2)}, {"0", max(1, runtime.NumCPU()/2)}, {"many", max(1, runtime.NumCPU()/2)}} {
		t.Setenv(startSlotsEnv, tt.env)
		if got := StartSlots(); got != tt.want {
			t.Errorf("%s=%q: StartSlots() = %d, want %d", startSlotsEnv, tt.env, got, tt.want)
		}
	}
}

// TestStartSlotsIgnoreSquattedDir: the slots live in a directory of the
// user's own under the shared root. One that another user could write (or
// made, or a link to elsewhere), with its slot locked by that user, does
// not hold the start back: the start goes at once and makes nothing there.
func TestStartSlotsIgnoreSquattedDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	squat := func(t *testing.T, root string) {
		dir := filepath.Join(root, fmt.Sprintf("raystep-%d", os.Getuid()))
		f, err := os.OpenFile(filepath.Join(dir, "head-start.0.lock"), os.O_RDONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]func(t *testing.T, root string){
		"world-writable": func(t *testing.T, root string) {
			dir := filepath.Join(root, fmt.Sprintf("raystep-%d", os.Getuid()))
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil { // past the umask
				t.Fatal(err)
			}
			squat(t, root)
		},
		"a link": func(t *testing.T, root string) {
			elsewhere := t.TempDir()
			if err := os.Symlink(elsewhere, filepath.Join(root, fmt.Sprintf("raystep-%d", os.Getuid()))); err != nil {
				t.Fatal(err)
			}
			squat(t, root)
		},
	}
	if os.Getuid() == 0 {
		cases["another user's"] = func(t *testing.T, root string) {
			dir := filepath.Join(root, fmt.Sprintf("raystep-%d", os.Getuid()))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			squat(t, root)
			if err := os.Chown(dir, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			prepare(t, root)
			release, waited, err := takeStartSlot(ctx, root, 1)
			if err != nil || waited {
				t.Fatalf("a start beside a squatted slot dir: waited %v, %v; want it at once", waited, err)
			}
			release()
		})
	}
	// The user's own dir: made private, and its slot taken in turn.
	root := t.TempDir()
	release, _, err := takeStartSlot(ctx, root, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	fi, err := os.Stat(filepath.Join(root, fmt.Sprintf("raystep-%d", os.Getuid())))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the slot dir: %v, %v; want mode 0700", fi, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 3*slotPoll)
	defer cancelShort()
	if _, _, err := takeStartSlot(short, root, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second start while the user's own slot is taken: %v, want it to wait", err)
	}
}

// TestStartSlotsGoInTheOrderTheStartsCame: with one slot taken, a start
// that came first gets it before one that came later, however the two
// poll; and a ticket left by a process that is gone holds nobody back.
func TestStartSlotsGoInTheOrderTheStartsCame(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := slotDir(root)
	if err != nil {
		t.Fatal(err)
	}
	// A dead start's ticket, older than any other: a file nobody holds.
	dead := filepath.Join(dir, ticketPrefix+"00000000000000000001.1.1")
	if err := os.WriteFile(dead, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// And the unnamed tickets of starts killed while they made them: an
	// old one goes, a new one (being made this moment) stays.
	abandoned, making := filepath.Join(dir, joiningPrefix+"1"), filepath.Join(dir, joiningPrefix+"2")
	for _, f := range []string{abandoned, making} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * abandonedAfter)
	if err := os.Chtimes(abandoned, old, old); err != nil {
		t.Fatal(err)
	}

	release, _, err := takeStartSlot(ctx, root, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead start's ticket is still there (%v)", err)
	}
	if _, err := os.Stat(abandoned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the abandoned unnamed ticket is still there (%v)", err)
	}
	if _, err := os.Stat(making); err != nil {
		t.Errorf("a ticket being made was removed: %v", err)
	}
	_ = os.Remove(making)
	order := make(chan string, 2)
	start := func(name string) {
		go func() {
			r, _, err := takeStartSlot(ctx, root, 1)
			if err != nil {
				t.Errorf("%s start: %v", name, err)
				return
			}
			order <- name
			r()
		}()
	}
	waitTickets := func(want int) {
		for {
			entries, _ := os.ReadDir(dir)
			n := 0
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ticketPrefix) {
					n++
				}
			}
			if n == want {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d starts queued, want %d", n, want)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	start("first")
	waitTickets(1)
	start("second")
	waitTickets(2)
	release()
	for _, want := range []string{"first", "second"} {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("the %s start got the slot, want the %s", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("the %s start did not get the slot", want)
		}
	}
	waitTickets(0)

	// A free slot is not for a start while one that came before it waits.
	earlier := joinQueue(dir)
	short, cancelShort := context.WithTimeout(ctx, 3*slotPoll)
	_, _, err = takeStartSlot(short, root, 1)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a start took the free slot while an earlier one waited (%v)", err)
	}
	earlier.leave()
	r, _, err := takeStartSlot(ctx, root, 1)
	if err != nil {
		t.Fatalf("once the earlier start left: %v", err)
	}
	r()
}
