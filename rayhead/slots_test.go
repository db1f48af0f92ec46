package rayhead

import (
	"context"
	"errors"
	"runtime"
	"strings"
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
