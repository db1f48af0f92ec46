package local

import (
	"context"
	"errors"
	"fmt"
	"time"
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
			return fmt.Errorf("local cluster %s, which the step borrows, reached its expiry (%s) and stops: "+
				"raystep up --name %s --ttl DUR extends it while it runs", name, in.Expires.UTC().Format(time.RFC3339), name)
		case in.Status != StatusRunning:
			return fmt.Errorf("local cluster %s, which the step borrows, is %s: its head no longer runs", name, in.Status)
		}
		t.Reset(max(0, min(lostCheck, in.Expires.Sub(c.now()))))
	}
}
