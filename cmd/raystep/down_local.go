package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/runner/local"
)

// downLocal is down on the local backend: it checks every name and finds
// every cluster first, stopping nothing when one is missing (exit 2, as
// KubeRay's down for a name that is no interactive cluster), then stops
// them one by one, each returning once its processes are gone. A cluster
// that already stopped (expired, or its head died) only has what is left
// of it cleared away.
func (a *app) downLocal(cmd *cobra.Command, names []string) error {
	if cmd.Flags().Changed("namespace") {
		return &usageError{errors.New("down: --namespace has no meaning on the local backend: drop it, or use --backend kuberay")}
	}
	for _, n := range names {
		if err := local.CheckName(n); err != nil {
			return &usageError{fmt.Errorf("down: %w", err)}
		}
	}
	c, err := a.localClusters()
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
	ctx := cmd.Context()
	for _, n := range names {
		if err := c.Down(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("down: %w", err))
			continue
		}
		fmt.Fprintf(a.stdout, "Local cluster %s stopped\n", n)
	}
	return errors.Join(errs...)
}
