package raysubmit

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"
)

// NodeStats is one alive node of the dashboard's GET /nodes?view=summary,
// as Ray 2.60's reporter agent publishes it, reduced to its utilization:
// what the UI charts and a step's history summarizes.
type NodeStats struct {
	// Name is the node's host name (else its IP, else its id), with
	// " (head)" on the head.
	Name string
	// CPU and Mem are percentages; GPU is the mean utilization of its
	// GPUs in percent, -1 when it has none that report.
	CPU, Mem, GPU float64
	// At is when the node's reporter agent took these figures, by the
	// node's clock; zero when the dashboard does not say. The agent
	// takes them every 5 s (Ray's default), and the dashboard gives the
	// latest until the next, so two reads can give one report.
	At time.Time
}

// Nodes asks the dashboard for its alive nodes' utilization.
func (c *Client) Nodes(ctx context.Context) ([]NodeStats, error) {
	var body struct {
		Data struct {
			Summary []struct {
				Now      float64   `json:"now"` // seconds since the epoch
				Hostname string    `json:"hostname"`
				IP       string    `json:"ip"`
				CPU      float64   `json:"cpu"` // percent
				Mem      []float64 `json:"mem"` // total, available, percent, used (bytes)
				GPUs     []struct {
					Utilization *float64 `json:"utilizationGpu"`
				} `json:"gpus"`
				Raylet struct {
					NodeID     string `json:"nodeId"`
					State      string `json:"state"`
					IsHeadNode bool   `json:"isHeadNode"`
				} `json:"raylet"`
			} `json:"summary"`
		} `json:"data"`
	}
	if err := c.getJSON(ctx, "/nodes?view=summary", &body); err != nil {
		return nil, fmt.Errorf("read node stats: %w", err)
	}
	out := make([]NodeStats, 0, len(body.Data.Summary))
	for _, n := range body.Data.Summary {
		if n.Raylet.State != "" && n.Raylet.State != "ALIVE" {
			continue
		}
		s := NodeStats{Name: cmp.Or(n.Hostname, n.IP, n.Raylet.NodeID), CPU: n.CPU, GPU: -1}
		if n.Raylet.IsHeadNode {
			s.Name += " (head)"
		}
		if n.Now > 0 {
			sec, frac := math.Modf(n.Now)
			s.At = time.Unix(int64(sec), int64(frac*1e9))
		}
		if len(n.Mem) >= 3 {
			s.Mem = n.Mem[2]
		}
		var sum float64
		var count int
		for _, g := range n.GPUs {
			if g.Utilization != nil {
				sum += *g.Utilization
				count++
			}
		}
		if count > 0 {
			s.GPU = sum / float64(count)
		}
		out = append(out, s)
	}
	return out, nil
}
