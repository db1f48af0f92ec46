package fleet

import (
	"context"
	"errors"
	"time"
)

// Scope is where ls and gc look.
type Scope struct {
	// Namespace is the one --namespace names; empty for the backend's
	// default. Local clusters have none: a namespace leaves them out.
	Namespace string
	// All looks in every namespace (-A).
	All bool
}

// DefaultHeartbeatGrace is how long `raystep gc` lets a step's heartbeat
// lapse by default before it treats the step as gone.
const DefaultHeartbeatGrace = 5 * time.Minute

// GCOptions are gc's flags.
type GCOptions struct {
	// OlderThan keeps what was made less long ago than this.
	OlderThan time.Duration
	// HeartbeatGrace is how long a step's heartbeat may be silent before
	// its cluster counts as abandoned.
	HeartbeatGrace time.Duration
	// DryRun says what would be done and does nothing.
	DryRun bool
	// Now is the time this machine says it is.
	Now time.Time
}

// ErrNotHere is wrapped by a Fleet's error when the fleet does not apply
// to the scope or to this machine (no kubeconfig, and nobody asked for
// Kubernetes; a namespace, which local clusters lack): ls and gc go on
// without it.
var ErrNotHere = errors.New("not here")

// A Fleet is one backend's clusters, as ls and gc see them.
type Fleet interface {
	// List returns the fleet's clusters in scope, steps first.
	List(ctx context.Context, scope Scope) ([]Record, error)
	// GC deletes (or, with DryRun, judges) what is abandoned or expired
	// in scope and tells each decision to line, one line a cluster: what
	// it did and why.
	GC(ctx context.Context, scope Scope, o GCOptions, line func(string)) error
	// DownRun deletes the run-scoped clusters of the Dagster run runID
	// in scope, waits until each is gone and tells each one gone to gone.
	DownRun(ctx context.Context, scope Scope, runID string, gone func(string)) error
}

// List asks every fleet in order and returns all their records, leaving
// out the fleets that are not here.
func List(ctx context.Context, fleets []Fleet, scope Scope) ([]Record, error) {
	var all []Record
	for _, f := range fleets {
		rows, err := f.List(ctx, scope)
		if errors.Is(err, ErrNotHere) {
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	return all, nil
}

// GC collects in every fleet in order, going on after a fleet's failure,
// and returns every fleet's error together.
func GC(ctx context.Context, fleets []Fleet, scope Scope, o GCOptions, line func(string)) error {
	var errs []error
	for _, f := range fleets {
		if err := f.GC(ctx, scope, o, line); err != nil && !errors.Is(err, ErrNotHere) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DownRun deletes the run-scoped clusters of the Dagster run runID in
// every fleet, going on after a fleet's failure, and returns how many it
// deleted with every fleet's error together.
func DownRun(ctx context.Context, fleets []Fleet, scope Scope, runID string, gone func(string)) (int, error) {
	var errs []error
	n := 0
	count := func(msg string) { n++; gone(msg) }
	for _, f := range fleets {
		if err := f.DownRun(ctx, scope, runID, count); err != nil && !errors.Is(err, ErrNotHere) {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}
