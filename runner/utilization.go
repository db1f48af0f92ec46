package runner

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// NodeSampler is implemented by the Jobs of a dashboard that reports its
// nodes' utilization (Ray's /nodes?view=summary). While the job runs, the
// runner samples it now and then for the step's history.
type NodeSampler interface {
	// Nodes returns each alive node's utilization now.
	Nodes(ctx context.Context) ([]NodeSample, error)
}

// NodeSample is one node's utilization at one moment, in percent; GPU is
// -1 for a node without GPUs that report. At is when the node took the
// figures, by its own clock; zero when the dashboard does not say.
type NodeSample struct {
	Node          string
	CPU, Mem, GPU float64
	At            time.Time
}

// NodeUtilization is one node's utilization over the job's run: the mean
// and the peak of the samples the step took.
type NodeUtilization struct {
	Node    string
	Samples int
	CPU     Stat
	Mem     Stat
	// GPU is nil for a node without GPUs.
	GPU *Stat
}

// Stat is a mean and a peak, in percent.
type Stat struct{ Mean, Peak float64 }

// Sampling of the nodes' utilization while the job runs: a first read
// once the job has run a moment, which is not counted, then one once the
// nodes have reported again, then one every DefaultSampleEvery. One GET of
// the dashboard each: nothing next to the job's own log stream, and none
// at all for a job shorter than baselineAfter.
//
// Ray's reporter agent on each node takes its figures every 5 s (its
// default), and the dashboard gives the latest until the next: the
// figures early in the run may have been taken before it (on a head that
// has just started, they are its first, whose CPU is always 0). So each
// node's report counts once, and never the first the step sees of that
// node (see add). A job shorter than firstSampleAfter has no samples.
const (
	baselineAfter      = time.Second
	firstSampleAfter   = 7 * time.Second
	DefaultSampleEvery = 10 * time.Second
)

// utilization accumulates the samples of a step.
type utilization struct {
	mu    sync.Mutex
	nodes map[string]*nodeAcc
}

type nodeAcc struct {
	seen             time.Time // when the newest report seen was taken
	n                int
	cpu, mem, gpu    float64 // sums
	cpuP, memP, gpuP float64 // peaks
	gpuN             int
}

// add counts each node's report once: a sample taken no later than the
// node's last one seen is that report again, and the first seen of a node
// is only where its counting starts (it predates the job, or it is the
// node's first report, whose CPU reads 0 whatever the load). Samples
// without a time all count.
func (u *utilization) add(samples []NodeSample) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.nodes == nil {
		u.nodes = map[string]*nodeAcc{}
	}
	for _, s := range samples {
		a := u.nodes[s.Node]
		if a == nil {
			a = &nodeAcc{seen: s.At}
			u.nodes[s.Node] = a
			if !s.At.IsZero() {
				continue
			}
		}
		if !s.At.IsZero() {
			if !s.At.After(a.seen) {
				continue
			}
			a.seen = s.At
		}
		a.n++
		a.cpu, a.cpuP = a.cpu+s.CPU, max(a.cpuP, s.CPU)
		a.mem, a.memP = a.mem+s.Mem, max(a.memP, s.Mem)
		if s.GPU >= 0 {
			a.gpuN++
			a.gpu, a.gpuP = a.gpu+s.GPU, max(a.gpuP, s.GPU)
		}
	}
}

// summary is each node's mean and peak, the head first, then by name.
func (u *utilization) summary() []NodeUtilization {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []NodeUtilization
	for name, a := range u.nodes {
		if a.n == 0 {
			continue
		}
		nu := NodeUtilization{Node: name, Samples: a.n,
			CPU: Stat{Mean: a.cpu / float64(a.n), Peak: a.cpuP}, Mem: Stat{Mean: a.mem / float64(a.n), Peak: a.memP}}
		if a.gpuN > 0 {
			nu.GPU = &Stat{Mean: a.gpu / float64(a.gpuN), Peak: a.gpuP}
		}
		out = append(out, nu)
	}
	slices.SortFunc(out, func(a, b NodeUtilization) int {
		ah, bh := strings.HasSuffix(a.Node, "(head)"), strings.HasSuffix(b.Node, "(head)")
		if ah != bh {
			if ah {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Node, b.Node)
	})
	return out
}

// sampleNodes samples the nodes' utilization until the returned stop is
// called; stop returns at once (a sample in flight is abandoned). Nothing
// happens unless the step's Jobs can sample and the runner samples.
func (s *state) sampleNodes(ctx context.Context) (stop func()) {
	ns, ok := s.jobs.(NodeSampler)
	every := s.r.SampleEvery
	if !ok || every < 0 {
		return func() {}
	}
	if every == 0 {
		every = DefaultSampleEvery
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait, next := baselineAfter, firstSampleAfter-baselineAfter
		for sleep(ctx, s.clock, wait) == nil {
			if nodes, err := ns.Nodes(ctx); err == nil {
				s.util.add(nodes)
			}
			wait, next = next, every
		}
	}()
	return func() { cancel(); <-done }
}
