package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Run-scoped clusters on the local backend (spec.cluster.reuse: run): one
// detached private head per Dagster run (a private head ignores the
// cluster section, so every step of the run shares it), an
// interactive cluster named like KubeRay's run-scoped RayCluster
// (runner.RunClusterName) and owned by RunOwner(runID). Up's lock on the
// state dir makes the steps of a run that arrive together start one head:
// the first starts it, the others find it running and attach. Each step
// submits its own job to it and none stops it; DownRun does, when the run
// ends, and the head's supervisor at its expiry (the run's timeout).

// runOwnerPrefix starts the owner of every run-scoped cluster.
const runOwnerPrefix = "dagster-run:"

// RunOwner is the owner recorded for the run-scoped clusters of runID.
func RunOwner(runID string) string { return runOwnerPrefix + runID }

// IsRunScoped reports whether in is a run-scoped cluster.
func IsRunScoped(in Interactive) bool { return strings.HasPrefix(in.Owner, runOwnerPrefix) }

// UpRun brings up, or attaches to, the run-scoped cluster name of the
// Dagster run runID, living ttl from now, and returns it running with the
// Ray token its dashboard wants.
func (c *Clusters) UpRun(ctx context.Context, name, runID string, ttl time.Duration) (in Interactive, token string, started bool, err error) {
	in, started, err = c.Up(ctx, UpOptions{Name: name, Owner: RunOwner(runID), TTL: ttl})
	if err != nil {
		return Interactive{}, "", false, fmt.Errorf("run-scoped cluster of Dagster run %s: %w", runID, err)
	}
	b, err := os.ReadFile(in.TokenFile)
	if err != nil {
		return Interactive{}, "", started, fmt.Errorf("read the token of run-scoped cluster %s: %w", name, err)
	}
	return in, strings.TrimSpace(string(b)), started, nil
}

// DownRun stops every run-scoped cluster of the Dagster run runID and
// waits until each is gone; it returns their names, none when the run
// has none.
func (c *Clusters) DownRun(ctx context.Context, runID string) ([]string, error) {
	all, err := c.List()
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	for _, in := range all {
		if in.Owner != RunOwner(runID) {
			continue
		}
		if err := c.Down(ctx, in.Name); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		names = append(names, in.Name)
	}
	return names, errors.Join(errs...)
}
