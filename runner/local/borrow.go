package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
)

// lostCheck is how often Lost reads the record of a borrowed cluster
// between its expiries, to notice a down or a head that died.
const lostCheck = 2 * time.Second

// Lost watches the local cluster name, which a step borrows (`raystep run
// --cluster NAME`), and returns why once it is no longer there for the
// step: its expiry passed (read again at each expiry, so an `up --ttl`
// that extends it counts), it was brought down, or its head died. It
// returns nil when ctx ends first.
func (c *Clusters) Lost(ctx context.Context, name string) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if ctx.Err() != nil { // both were ready
			return nil
		}
		in, err := c.Get(name)
		switch {
		case errors.Is(err, ErrNotFound):
			return fmt.Errorf("local cluster %s, which the step borrows, was brought down (its record is gone)", name)
		case err != nil:
			return fmt.Errorf("local cluster %s, which the step borrows: %w", name, err)
		case in.Status == StatusExpired:
			err := fmt.Errorf("local cluster %s, which the step borrows, reached its expiry (%s) and stops: "+
				"raystep up --name %s --ttl DUR extends it while it runs", name, in.Expires.UTC().Format(time.RFC3339), name)
			if k := c.supervisor(in); k.Running() {
				// The keeper stops the head now, at its expiry, with every
				// process of it: the job goes with it, and asking its
				// dashboard to stop the job would only wait on a head that
				// is going away.
				return &expired{error: err, keeper: k}
			}
			return err
		case in.Status != StatusRunning:
			return fmt.Errorf("local cluster %s, which the step borrows, is %s: its head no longer runs", name, in.Status)
		}
		t.Reset(max(0, min(lostCheck, in.Expires.Sub(c.now()))))
	}
}

// expired is Lost's error for a borrowed cluster whose keeper is stopping
// it at its expiry: the cluster is gone with the job (runner.ErrClusterGone)
// once the keeper has exited, which await waits for.
type expired struct {
	error
	keeper rayhead.Detached
}

func (e *expired) Unwrap() []error { return []error{e.error, runner.ErrClusterGone} }

// keeperPoll is how often await looks whether the keeper has exited.
const keeperPoll = 100 * time.Millisecond

// await returns once the keeper has exited, or an error when ctx ended
// first.
func (e *expired) await(ctx context.Context) error {
	t := time.NewTicker(keeperPoll)
	defer t.Stop()
	for e.keeper.Running() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("its keeper (pid %d) is still stopping it: %w", e.keeper.Pid, context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}
