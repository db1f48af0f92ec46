package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// samplingJobs answers each Nodes call with the next answer the test sends.
type samplingJobs struct {
	fakeJobs
	answers chan nodesAnswer
}

type nodesAnswer struct {
	nodes []NodeSample
	err   error
}

func (j *samplingJobs) Nodes(ctx context.Context) ([]NodeSample, error) {
	select {
	case a := <-j.answers:
		return a.nodes, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// spacedClock fires every timer at once and records how long each was.
type spacedClock struct {
	*fakeClock
	mu     sync.Mutex
	spaced []time.Duration
}

func (c *spacedClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.spaced = append(c.spaced, d)
	c.mu.Unlock()
	return c.fakeClock.AfterFunc(0, f)
}

// TestSampleNodes: the first read of the nodes, a second into the run,
// only marks where counting starts (its figures may predate the job; a new
// head's first report has a CPU of 0), the next comes once the nodes have
// reported again, and the rest every SampleEvery; a report read twice counts once, a node's first report
// seen mid-run does not count, a failed read is skipped, and samples
// without a time all count.
func TestSampleNodes(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	jobs := &samplingJobs{answers: make(chan nodesAnswer)}
	clock := &spacedClock{fakeClock: newFakeClock()}
	s := &state{r: &Runner{}, clock: clock, jobs: jobs}
	stop := s.sampleNodes(t.Context())
	for _, a := range []nodesAnswer{
		{nodes: []NodeSample{{Node: "h (head)", CPU: 0, Mem: 20, GPU: -1, At: at(0)}, {Node: "gone", CPU: 99, At: at(0)}}},
		{nodes: []NodeSample{{Node: "h (head)", CPU: 0, Mem: 20, GPU: -1, At: at(0)}}},
		{nodes: []NodeSample{{Node: "h (head)", CPU: 40, Mem: 30, GPU: -1, At: at(5)}, {Node: "w1", CPU: 90, Mem: 10, GPU: 0, At: at(4)}}},
		{err: errors.New("dashboard gone")},
		{nodes: []NodeSample{{Node: "h (head)", CPU: 40, Mem: 30, GPU: -1, At: at(5)}, {Node: "w1", CPU: 70, Mem: 10, GPU: 50, At: at(9)}, {Node: "old", CPU: 10, GPU: -1}}},
		{nodes: []NodeSample{{Node: "h (head)", CPU: 60, Mem: 50, GPU: -1, At: at(15)}, {Node: "w1", CPU: 50, Mem: 20, GPU: 100, At: at(14)}, {Node: "old", CPU: 20, GPU: -1}}},
	} {
		jobs.answers <- a
	}
	stop()

	got := s.util.summary()
	if len(got) != 3 || got[0].Node != "h (head)" || got[1].Node != "old" || got[2].Node != "w1" {
		t.Fatalf("summary = %+v, want the head, old and w1", got)
	}
	if h := got[0]; h.Samples != 2 || h.CPU != (Stat{Mean: 50, Peak: 60}) || h.Mem != (Stat{Mean: 40, Peak: 50}) || h.GPU != nil {
		t.Errorf("head: %+v, want its reports at 5 s and 15 s", h)
	}
	if o := got[1]; o.Samples != 2 || o.CPU != (Stat{Mean: 15, Peak: 20}) {
		t.Errorf("old: %+v, want both its samples without a time", o)
	}
	if w := got[2]; w.Samples != 2 || w.CPU != (Stat{Mean: 60, Peak: 70}) || w.GPU == nil || *w.GPU != (Stat{Mean: 75, Peak: 100}) {
		t.Errorf("w1: %+v (gpu %+v), want its reports at 9 s and 14 s", w, w.GPU)
	}

	clock.mu.Lock()
	defer clock.mu.Unlock()
	want := []time.Duration{baselineAfter, firstSampleAfter - baselineAfter, DefaultSampleEvery, DefaultSampleEvery, DefaultSampleEvery, DefaultSampleEvery}
	if len(clock.spaced) < len(want) {
		t.Fatalf("reads spaced %v, want %v then more", clock.spaced, want)
	}
	for i, d := range want {
		if clock.spaced[i] != d {
			t.Errorf("reads spaced %v, want %v then more", clock.spaced, want)
			break
		}
	}
}
