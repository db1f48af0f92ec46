package ui

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/raystep/raystep/raysubmit"
)

// A probe asks one cluster's Ray head, every Poll, for its jobs and its
// nodes' utilization, while a page of the cluster is open and for
// probeLinger after the last one closed: one set of requests per cluster
// whatever the number of tabs, and a chart that has history when a page
// opens again.
const (
	defaultPoll = 5 * time.Second
	probeLinger = 10 * time.Minute
	// utilWindow is how far back the utilization charts go.
	utilWindow = 10 * time.Minute
)

// Sample is one node's utilization at one time, in percent; GPU is -1 on
// a node without GPUs.
type Sample struct {
	At       time.Time
	CPU, Mem float64
	GPU      float64
}

// probe is the shared state of one cluster's head.
type probe struct {
	mu    sync.Mutex
	jobs  []raysubmit.JobDetails
	nodes map[string][]Sample // by node (host name, "head" marked)
	// reports is, by node listed in the last poll of the nodes, the time
	// of its report then: the dashboard gives a node's latest report
	// until the next, 5 s later, so a poll can read one a second time.
	reports map[string]time.Time
	listed  bool  // a poll of the nodes worked
	err     error // the last poll's failure, nil once one worked
	polled  bool  // a poll finished
	changed chan struct{}
}

// newProbe returns a probe that has polled nothing yet.
func newProbe() *probe {
	return &probe{nodes: map[string][]Sample{}, reports: map[string]time.Time{}, changed: make(chan struct{})}
}

// probes are the running probes by record key.
type probes struct {
	pool  pool[*probe]
	reach Reach
	find  func(key string) *Record // the current record of a key
	poll  time.Duration
}

// acquire returns the running probe of r, starting it, and a release.
func (ps *probes) acquire(r *Record) (*probe, func()) {
	key := r.Key()
	return ps.pool.acquire(key, func(ctx context.Context, _ func()) *probe {
		p := newProbe()
		go ps.run(ctx, p, key)
		return p
	})
}

// run polls until ctx is done.
func (ps *probes) run(ctx context.Context, p *probe, key string) {
	poll := ps.poll
	if poll <= 0 {
		poll = defaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		p.record(ps.once(ctx, key))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// result is one poll.
type result struct {
	jobs  []raysubmit.JobDetails
	nodes []raysubmit.NodeStats
	at    time.Time
	err   error
}

// once asks the head of the cluster named key for its jobs and node
// stats, within one poll.
func (ps *probes) once(ctx context.Context, key string) result {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	r := ps.find(key)
	if r == nil {
		return result{err: fmt.Errorf("%s: %w: the cluster is gone", key, ErrNoDashboard)}
	}
	h, err := ps.reach(ctx, r)
	if err != nil {
		return result{err: err}
	}
	c, err := h.Client()
	if err != nil {
		return result{err: err}
	}
	c.HTTP.RetryMax = 1
	jobs, err := c.List(ctx)
	if err != nil {
		return result{err: fmt.Errorf("list the Ray jobs: %w", err)}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return result{jobs: jobs, err: err}
	}
	return result{jobs: jobs, nodes: nodes, at: time.Now()}
}

// record keeps a poll's result and tells the pages.
func (p *probe) record(res result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polled, p.err = true, res.err
	if res.jobs != nil {
		slices.SortFunc(res.jobs, func(a, b raysubmit.JobDetails) int { return int(b.StartTime - a.StartTime) })
		p.jobs = res.jobs
	}
	if res.err == nil {
		p.plot(res)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// plot adds a poll's node reports to the charts, each report once. A
// node that joined while the probe watched gives first a CPU of 0 (Ray's
// reporter has nothing to compare with yet), which is not the node's
// load: that report is left out.
func (p *probe) plot(res result) {
	cutoff := res.at.Add(-utilWindow)
	reports := make(map[string]time.Time, len(res.nodes))
	for _, n := range res.nodes {
		last, seen := p.reports[n.Name]
		reports[n.Name] = n.At
		switch {
		case seen && !n.At.IsZero() && !n.At.After(last):
			continue // the report of the last poll
		case !seen && p.listed && n.CPU == 0:
			continue // a new node's first report
		}
		s := append(p.nodes[n.Name], Sample{At: res.at, CPU: n.CPU, Mem: n.Mem, GPU: n.GPU})
		i, _ := slices.BinarySearchFunc(s, cutoff, func(x Sample, t time.Time) int { return x.At.Compare(t) })
		p.nodes[n.Name] = s[i:]
	}
	p.reports, p.listed = reports, true
}

// Changed returns a channel closed at the next poll.
func (p *probe) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// state returns the jobs, the utilization by node and the last failure.
func (p *probe) state() ([]raysubmit.JobDetails, map[string][]Sample, error, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	nodes := make(map[string][]Sample, len(p.nodes))
	for k, v := range p.nodes {
		nodes[k] = slices.Clone(v)
	}
	return slices.Clone(p.jobs), nodes, p.err, p.polled
}

// await waits until the probe polled once, at most d.
func (p *probe) await(ctx context.Context, d time.Duration) {
	p.mu.Lock()
	polled, ch := p.polled, p.changed
	p.mu.Unlock()
	if polled {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}
