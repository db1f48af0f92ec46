package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// queuedCluster is a fakeCluster that waits in a queue.
type queuedCluster struct {
	*fakeCluster
	admitted func(ctx context.Context) error
}

var _ Queued = queuedCluster{}

func (c queuedCluster) Admitted(ctx context.Context) error { return c.admitted(ctx) }

// TestQueueClock: with timeouts.queue the wait for admission has its own
// clock and timeouts.provision counts from admission; without it the
// provision clock covers the queue too.
func TestQueueClock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		queue         time.Duration
		wait, provide time.Duration // queue wait, then provisioning time
		wantMsg       string        // "" for success
	}{
		{name: "separate clocks: long wait, quick provisioning", queue: time.Hour, wait: 50 * time.Minute, provide: 10 * time.Minute},
		{name: "queue deadline", queue: time.Hour, wait: 2 * time.Hour, wantMsg: "timeouts.queue 1h0m0s"},
		{name: "provision deadline after admission", queue: time.Hour, wait: 50 * time.Minute, provide: 16 * time.Minute, wantMsg: "timeouts.provision 15m0s"},
		{name: "without a queue timeout provision covers the wait", wait: 10 * time.Minute, provide: 10 * time.Minute, wantMsg: "timeouts.provision 15m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.step.ProvisionTimeout, h.step.QueueTimeout = 15*time.Minute, tt.queue
			// advance moves the clock by d; past a deadline it waits for
			// the step's context to end, as a real wait would.
			advance := func(ctx context.Context, d time.Duration, limit time.Duration) error {
				h.clock.Advance(d)
				if d > limit {
					return blockUntilDone(ctx)
				}
				return nil
			}
			// Without a queue clock the runner does not ask for admission:
			// Ready waits through the queue, as the KubeRay backend's does.
			inReady := tt.provide
			if tt.queue == 0 {
				inReady += tt.wait
			}
			ready := h.cluster.ready
			h.cluster.ready = func(ctx context.Context) error {
				if err := advance(ctx, inReady, 15*time.Minute); err != nil {
					return err
				}
				return ready(ctx)
			}
			qc := queuedCluster{fakeCluster: h.cluster, admitted: func(ctx context.Context) error {
				h.calls.add("admitted")
				return advance(ctx, tt.wait, tt.queue)
			}}
			h.backend.provision = func(ctx context.Context, req Step) (Cluster, error) {
				h.calls.add("provision")
				return qc, nil
			}
			_, err := h.run()
			switch {
			case tt.wantMsg == "" && err != nil:
				t.Fatalf("Run: %v", err)
			case tt.wantMsg != "" && (!errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), tt.wantMsg)):
				t.Fatalf("Run error %v, want a deadline naming %q", err, tt.wantMsg)
			}
		})
	}
}
