package e2e

import (
	"context"
	"errors"
	"fmt"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
)

// rayJobs plugs the real Ray Jobs client into the runner, as the CLI does.
type rayJobs struct{ c *raysubmit.Client }

var _ runner.Jobs = rayJobs{}

func connectRay(_ context.Context, d runner.Dashboard) (runner.Jobs, error) {
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
