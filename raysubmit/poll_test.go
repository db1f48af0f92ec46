package raysubmit

import (
	"testing"
	"time"
)

// TestNextPoll: Follow polls a young driver often and an old one at most
// every PollInterval, waiting about a two-hundredth of the driver's age
// between; a job still PENDING (no driver yet) at most every pendingPoll
// while it is young, the share of its age after.
func TestNextPoll(t *testing.T) {
	t.Parallel()
	c := &Client{PollInterval: time.Second}
	for _, tt := range []struct {
		pending, running time.Duration // how long ago Follow began; the driver started (0: still PENDING)
		want             time.Duration
	}{
		{0, 0, pendingPoll},
		{time.Second, 0, pendingPoll},
		{60 * time.Second, 0, 300 * time.Millisecond},
		{time.Hour, 0, time.Second},
		{time.Second, 1, minPoll},
		{time.Second, time.Second, minPoll},
		{time.Second, 9 * time.Second, 50 * time.Millisecond},
		{time.Second, 20 * time.Second, 100 * time.Millisecond},
		{time.Second, 60 * time.Second, 300 * time.Millisecond},
		{time.Second, time.Hour, time.Second},
		// A job that waited long for its runtime environment: its driver's
		// end is noticed as soon as a young driver's.
		{10 * time.Minute, 1, minPoll},
	} {
		now := time.Now()
		f := &follower{c: c, start: now.Add(-tt.pending - tt.running)}
		if tt.running > 0 {
			f.running = now.Add(-tt.running)
		}
		if got := f.nextPoll(); got < tt.want || got > tt.want+tt.want/10 {
			t.Errorf("PENDING for %s, running for %s: next poll in %s, want %s", tt.pending, tt.running, got, tt.want)
		}
	}
	c.PollInterval = 10 * time.Millisecond // shorter than minPoll: minPoll
	f := &follower{c: c, start: time.Now()}
	f.saw(StatusRunning)
	if got := f.nextPoll(); got != minPoll {
		t.Errorf("PollInterval 10ms: next poll in %s, want %s", got, minPoll)
	}
}

// TestSawStartsTheDriversClock: only a status past PENDING starts it, once.
func TestSawStartsTheDriversClock(t *testing.T) {
	t.Parallel()
	f := &follower{start: time.Now()}
	for _, st := range []Status{"", StatusPending} {
		if f.saw(st); !f.running.IsZero() {
			t.Fatalf("saw(%q) started the driver's clock", st)
		}
	}
	f.saw(StatusRunning)
	first := f.running
	if first.IsZero() {
		t.Fatal("saw(RUNNING) did not start the driver's clock")
	}
	f.saw(StatusSucceeded)
	if f.running != first {
		t.Fatal("a later status moved the driver's clock")
	}
}
