package ui

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/raysubmit"
)

// TestProbePlotsEachReportOnce: a cluster page's charts get one point per
// node report. Ray's dashboard gives a node's latest report until the
// next (every 5 s, as the page polls), so a poll can read the last one
// again; a node that joins while the page watches reports a CPU of 0
// first, before Ray's reporter has anything to compare with. A failed
// poll leaves the charts as they were; a report without a time is
// plotted each poll, as nothing tells it from the next.
func TestProbePlotsEachReportOnce(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	head := func(report int, cpu float64) raysubmit.NodeStats {
		return raysubmit.NodeStats{Name: "ray-head (head)", CPU: cpu, Mem: 30, GPU: -1, At: at(report)}
	}
	worker := func(report int, cpu float64) raysubmit.NodeStats {
		return raysubmit.NodeStats{Name: "gpu-worker-0", CPU: cpu, Mem: 10, GPU: 0, At: at(report)}
	}
	polls := []result{
		{nodes: []raysubmit.NodeStats{head(-2, 40)}, at: at(0)},                 // a page opens on a running cluster
		{nodes: []raysubmit.NodeStats{head(3, 55)}, at: at(5)},                  // the next report
		{nodes: []raysubmit.NodeStats{head(3, 55)}, at: at(10)},                 // read again: the reporter was late
		{err: errors.New("dashboard: connection refused"), at: at(15)},          // a failed poll
		{nodes: []raysubmit.NodeStats{head(13, 70), worker(14, 0)}, at: at(20)}, // a worker joins: its CPU 0 is no load
		{nodes: []raysubmit.NodeStats{head(18, 65), worker(19, 80)}, at: at(25)},
		{nodes: []raysubmit.NodeStats{head(23, 0), worker(24, 0)}, at: at(30)},      // idle is 0 too, once the node is known
		{nodes: []raysubmit.NodeStats{{Name: "old-dashboard", CPU: 5}}, at: at(35)}, // no report times
		{nodes: []raysubmit.NodeStats{{Name: "old-dashboard", CPU: 5}}, at: at(40)},
	}
	p := newProbe()
	for _, res := range polls {
		p.record(res)
	}
	_, got, err, _ := p.state()
	want := map[string][]Sample{
		"ray-head (head)": {{At: at(0), CPU: 40, Mem: 30, GPU: -1}, {At: at(5), CPU: 55, Mem: 30, GPU: -1},
			{At: at(20), CPU: 70, Mem: 30, GPU: -1}, {At: at(25), CPU: 65, Mem: 30, GPU: -1}, {At: at(30), CPU: 0, Mem: 30, GPU: -1}},
		"gpu-worker-0":  {{At: at(25), CPU: 80, Mem: 10, GPU: 0}, {At: at(30), CPU: 0, Mem: 10, GPU: 0}},
		"old-dashboard": {{At: at(35), CPU: 5}, {At: at(40), CPU: 5}},
	}
	if diff := cmp.Diff(want, got); diff != "" || err != nil {
		t.Errorf("charts after the polls (-want +got):\n%s\nlast failure %v, want none", diff, err)
	}
}
