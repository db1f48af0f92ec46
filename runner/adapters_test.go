package runner_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/local"
)

// These adapters are what the CLI writes to plug the real clients into
// the runner; the tests use them to drive a real Ray head.

type rayJobs struct{ c *raysubmit.Client }

var _ runner.Jobs = rayJobs{}

func connectRay(ctx context.Context, d runner.Dashboard) (runner.Jobs, error) {
	c, err := raysubmit.New(raysubmit.Config{BaseURL: d.URL, Headers: d.Headers, Token: d.Token, CAFile: d.CAFile})
	if err != nil {
		return nil, err
	}
	return rayJobs{c: c}, nil
}

func (j rayJobs) UploadWorkingDir(ctx context.Context, dir string) (string, error) {
	return j.c.UploadWorkingDir(ctx, dir, raysubmit.PackageOptions{})
}

func (j rayJobs) Submit(ctx context.Context, r runner.JobRequest) (string, error) {
	resp, err := j.c.Submit(ctx, raysubmit.SubmitRequest{
		Entrypoint: r.Entrypoint, SubmissionID: r.SubmissionID, RuntimeEnv: r.RuntimeEnv, Metadata: r.Metadata,
		EntrypointNumCPUs: r.Resources.CPUs, EntrypointNumGPUs: r.Resources.GPUs,
		EntrypointMemory: r.Resources.Memory, EntrypointResources: r.Resources.Custom,
	})
	if errors.Is(err, raysubmit.ErrAlreadySubmitted) {
		return "", fmt.Errorf("%w: %w", runner.ErrAlreadySubmitted, err)
	}
	if err != nil {
		return "", err
	}
	return resp.SubmissionID, nil
}

func (j rayJobs) Get(ctx context.Context, id string) (runner.JobInfo, error) {
	d, err := j.c.Get(ctx, id)
	if err != nil {
		return runner.JobInfo{}, notFound(err)
	}
	return runner.JobInfo{JobID: d.JobID, Status: runner.JobStatus(d.Status), Message: d.Message,
		DriverExitCode: d.DriverExitCode, Start: d.Started(), End: d.Ended()}, nil
}

func (j rayJobs) Stop(ctx context.Context, id string) (bool, error) {
	ok, err := j.c.Stop(ctx, id)
	return ok, notFound(err)
}

func (j rayJobs) Tail(ctx context.Context, id string, onLine func(string)) error {
	return j.c.FollowLines(ctx, id, func(b []byte) error { onLine(string(b)); return nil })
}

func notFound(err error) error {
	if errors.Is(err, raysubmit.ErrNotFound) {
		return fmt.Errorf("%w: %w", runner.ErrNotFound, err)
	}
	return err
}

type pipesSession struct{ s *pipes.Session }

var _ runner.Session = pipesSession{}

func (a pipesSession) Send(m runner.Message) error {
	pm, err := pipes.NewMessage(pipes.Method(m.Method), m.Params)
	if err == nil {
		err = a.s.Forward(pm)
	}
	if errors.Is(err, pipes.ErrInvalidMessage) {
		return fmt.Errorf("%w: %w", runner.ErrInvalidMessage, err)
	}
	return err
}

func (a pipesSession) Close(exc *runner.Exception) error { return a.s.Close(toPipes(exc)) }

func toPipes(e *runner.Exception) *pipes.Exception {
	if e == nil {
		return nil
	}
	var name *string
	if e.Name != "" {
		name = &e.Name
	}
	return &pipes.Exception{Message: e.Message, Stack: e.Stack, Name: name, Cause: toPipes(e.Cause), Context: toPipes(e.Context)}
}

// borrowed is a Backend over a running head it does not own, like the
// local backend with RAY_ADDRESS.
type borrowed struct {
	head      *local.Head
	teardowns chan bool
}

var _ runner.Backend = (*borrowed)(nil)

func (b *borrowed) Name() string { return "local" }

func (b *borrowed) Provision(ctx context.Context, req runner.ClusterRequest) (runner.Cluster, error) {
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
