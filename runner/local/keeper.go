package local

import (
	"context"
	"errors"
	"fmt"

	"github.com/raystep/raystep/fleet"
)

// Keeper is the local interactive clusters of this machine as
// fleet.Keeper.
type Keeper struct {
	// Open returns the clusters, once the names were checked.
	Open func() (*Clusters, error)
}

var _ fleet.Keeper = Keeper{}

// Down checks every name and finds every cluster first, stopping nothing
// when one is missing, then stops them one by one, each returning once its
// processes are gone. A cluster that already stopped (expired, or its head
// died) only has what is left of it cleared away.
func (k Keeper) Down(ctx context.Context, names []string, gone func(string)) error {
	for _, n := range names {
		if err := CheckName(n); err != nil {
			return fmt.Errorf("down: %w", fleet.BadName(err.Error()))
		}
	}
	c, err := k.Open()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if _, err := c.Get(n); err != nil {
			errs = append(errs, fmt.Errorf("down: %w (raystep ls lists them)", err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range names {
		if err := c.Down(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("down: %w", err))
			continue
		}
		gone(fmt.Sprintf("Local cluster %s stopped", n))
	}
	return errors.Join(errs...)
}
