package fleet

import (
	"context"
	"io"
	"time"

	"github.com/raystep/raystep/schemas"
)

// A Keeper is one backend's interactive clusters, by name, in the scope
// the backend was made for: up, down and the way in to a running one.
type Keeper interface {
	// Up checks the request whole before anything starts (an error that
	// is ErrUsage or a *schemas.ValidationErrors), then makes the
	// cluster, or moves the expiry of the live one of that name, waits
	// until it is ready and tells the user how to use it. A cluster Up
	// made and then gave up on (not ready, cancelled) is gone when it
	// returns.
	Up(ctx context.Context, req UpRequest) error
	// Down finds every named cluster first and deletes nothing when one
	// is not there (an error that is ErrNotFound), then deletes them and
	// waits until each is gone, telling each one gone to gone.
	Down(ctx context.Context, names []string, gone func(msg string)) error
	// Dashboard tells the user the address of the running cluster's Ray
	// dashboard and keeps the way to it open until ctx ends, if there is
	// one to keep.
	Dashboard(ctx context.Context, name string, port uint16) error
	// Notebook waits until the Jupyter server that up --notebook started
	// on the cluster answers, tells the user its URL with its token and
	// keeps the way to it open until ctx ends, if there is one to keep.
	Notebook(ctx context.Context, name string, port uint16) error
}

// Placement is what a backend places a step by (see cmd/raystep's
// placer): the spec, its profile, and the interactive cluster the step
// borrows (run --cluster), if any.
type Placement struct {
	Spec    *schemas.Spec
	Profile *schemas.Profile
	Cluster string
}

// Streams are where a backend talks to the user: results on Out,
// progress, warnings and hints on Err.
type Streams struct{ Out, Err io.Writer }

// UpRequest is what `raystep up` asks of a backend, flags as given.
type UpRequest struct {
	// File is -f SPEC, empty for a cluster from flags alone; Set its
	// --set overrides.
	File string
	Set  []string
	// Name and Owner are --name and --owner, empty when not given.
	Name, Owner string
	// DefaultOwner is the owner when neither --owner nor -f names one
	// ($USER, else the login name), and how errors name where it came
	// from.
	DefaultOwner func() (owner, from string, err error)
	// GPU, Workers, CPUs and Memory shape the first worker group; the
	// backend says what CPUs means to it.
	GPU, CPUs, Memory string
	Workers           int32
	// TTL is --ttl; zero when not given.
	TTL time.Duration
	// Notebook also starts a Jupyter server on the head.
	Notebook bool
	// Idle and IdleStop are --idle and --idle-stop as given: a duration,
	// or "off"; see Idleness.
	Idle, IdleStop string
	// Given reports whether a flag, by its long name, was given.
	Given func(flag string) bool
	// Profile is the platform profile.
	Profile *schemas.Profile
}

// given reports whether the flag was given.
func (r UpRequest) given(flag string) bool { return r.Given != nil && r.Given(flag) }

// abortKey carries the channel a second signal closes.
type abortKey struct{}

// WithAbort returns ctx carrying abort, the channel a second signal
// closes: whoever tears down on the first stops waiting on the second.
func WithAbort(ctx context.Context, abort <-chan struct{}) context.Context {
	return context.WithValue(ctx, abortKey{}, abort)
}

// Abort returns the abort channel of ctx; nil (never closed) without one.
func Abort(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(abortKey{}).(<-chan struct{})
	return ch
}

// Undo runs undo with a context of its own, bounded by limit and by the
// second signal, after ctx (whose cancellation may be why) ended: the
// teardown of what a command made and then gave up on.
func Undo(ctx context.Context, limit time.Duration, undo func(context.Context) error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	go func() {
		select {
		case <-Abort(ctx):
			cancel()
		case <-dctx.Done():
		}
	}()
	return undo(dctx)
}
