package kuberay

import (
	"sync"
	"testing"
	"time"

	"github.com/raystep/raystep/runner"
)

// fakeClock is a manual clock: its timers fire when Advance passes them,
// and a test can wait until the code under test has set a timer.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]bool // pending
	changed chan struct{}       // closed and replaced when timers change
}

type fakeTimer struct {
	at time.Time
	f  func()
}

var _ runner.Clock = (*fakeClock)(nil)

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, timers: map[*fakeTimer]bool{}, changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers[t] = true
	c.broadcast()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := c.timers[t]
		delete(c.timers, t)
		c.broadcast()
		return was
	}
}

// Advance moves the clock and fires the timers it passes.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			delete(c.timers, t)
			go t.f()
		}
	}
	c.broadcast()
}

// broadcast wakes awaitTimers; c.mu is held.
func (c *fakeClock) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// awaitTimers waits until at least n timers are pending; it fails the
// test after a bound that only catches a hang.
func (c *fakeClock) awaitTimers(t *testing.T, n int) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		got, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("%d timers pending after 10s, want %d", got, n)
		}
	}
}

// fakeClock gives the backend a fake clock, starting now; the heartbeat
// tests keep the real one (they renew every millisecond).
func (f *fakes) fakeClock() *fakeClock {
	c := newFakeClock(time.Now().Truncate(time.Second))
	f.b.Clock = c
	return c
}
