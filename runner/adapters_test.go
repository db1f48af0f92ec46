package runner_test

import (
	"context"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/test/raytest"
)

// The real clients are plugged in by package adapters, as the CLI does.
var (
	connectRay = adapters.Connect
	packDir    = adapters.Pack
)

// pipesSession keeps the tests' short literal pipesSession{sess}.
type pipesSession struct{ s *pipes.Session }

func (p pipesSession) Send(m *pipes.Message) error { return adapters.Session{Pipes: p.s}.Send(m) }
func (p pipesSession) Close(exc *runner.Exception) error {
	return adapters.Session{Pipes: p.s}.Close(exc)
}

// borrowed is a Backend over a running head it does not own, like the
// local backend with RAY_ADDRESS.
type borrowed struct {
	head      raytest.Head
	teardowns chan bool
}

var _ runner.Backend = (*borrowed)(nil)

func (b *borrowed) Name() string { return "local" }

func (b *borrowed) Provision(ctx context.Context, _ runner.Step, _ runner.Sink) (runner.Cluster, error) {
	return borrowedCluster{b}, nil
}

type borrowedCluster struct{ b *borrowed }

func (c borrowedCluster) Name() string                         { return c.b.head.Address() }
func (borrowedCluster) Ready(context.Context) error            { return nil }
func (borrowedCluster) Failures() <-chan error                 { return nil }
func (borrowedCluster) SetJobID(context.Context, string) error { return nil }
func (c borrowedCluster) Dashboard(context.Context) (runner.Dashboard, error) {
	return runner.Dashboard{URL: c.b.head.DashboardURL()}, nil
}
func (c borrowedCluster) Teardown(ctx context.Context, keep bool) error {
	c.b.teardowns <- keep
	return nil
}
