package raysubmit

import (
	"testing"
	"time"
)

// TestNextPoll: Follow polls a young job often and an old one at most
// every PollInterval, waiting about a two-hundredth of the job's age between.
func TestNextPoll(t *testing.T) {
	t.Parallel()
	c := &Client{PollInterval: time.Second}
	for _, tt := range []struct {
		age  time.Duration
		want time.Duration
	}{
		{0, minPoll},
		{time.Second, minPoll},
		{9 * time.Second, 50 * time.Millisecond},
		{20 * time.Second, 100 * time.Millisecond},
		{60 * time.Second, 300 * time.Millisecond},
		{time.Hour, time.Second},
	} {
		f := &follower{c: c, start: time.Now().Add(-tt.age)}
		if got := f.nextPoll(); got < tt.want || got > tt.want+tt.want/10 {
			t.Errorf("after %s: next poll in %s, want %s", tt.age, got, tt.want)
		}
	}
	c.PollInterval = 10 * time.Millisecond // shorter than minPoll: minPoll
	if got := (&follower{c: c, start: time.Now()}).nextPoll(); got != minPoll {
		t.Errorf("PollInterval 10ms: next poll in %s, want %s", got, minPoll)
	}
}
