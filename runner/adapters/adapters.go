// Package adapters plugs raystep's real clients into the runner's
// interfaces: the Ray Jobs client (package raysubmit) as runner.Jobs and a
// Dagster Pipes session (package pipes) as runner.Session.
//
// It owns only the translation between the two vocabularies (request
// fields, sentinel errors, exception shapes); retries, auth and the wire
// formats stay in raysubmit and pipes, the step's lifecycle in runner.
package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
)

// Jobs is runner.Jobs over a raysubmit.Client.
type Jobs struct {
	// Client talks to one cluster's dashboard.
	Client *raysubmit.Client
}

var _ runner.Jobs = Jobs{}

// Connector builds Jobs with raystep's own settings; its Connect is the
// runner's Connect.
type Connector struct {
	// Logger receives the client's requests, retries and reconnections, all
	// at debug level; nil means none.
	Logger *zap.Logger
	// UserAgent is sent with every request, e.g. "raystep/1.4.0"; empty
	// means raysubmit.DefaultUserAgent.
	UserAgent string
	// MaxOutage bounds how long following a log keeps trying a dashboard
	// that stopped answering; zero means raysubmit.DefaultMaxOutage.
	MaxOutage time.Duration
}

// Connect builds Jobs for a dashboard.
func (c Connector) Connect(_ context.Context, d runner.Dashboard) (runner.Jobs, error) {
	rc, err := raysubmit.New(raysubmit.Config{BaseURL: d.URL, Headers: d.Headers, Token: d.Token, CAFile: d.CAFile,
		UserAgent: c.UserAgent, Logger: c.Logger})
	if err != nil {
		return nil, fmt.Errorf("ray jobs client for %s: %w", d.URL, err)
	}
	if c.MaxOutage > 0 {
		rc.MaxOutage = c.MaxOutage
	}
	return Jobs{Client: rc}, nil
}

// Connect is Connector{}.Connect: no logs, the default user agent and budget.
func Connect(ctx context.Context, d runner.Dashboard) (runner.Jobs, error) {
	return Connector{}.Connect(ctx, d)
}

// Pack is the runner's Pack: raysubmit.BuildPackage of dir without what
// excludes match.
func Pack(ctx context.Context, dir string, excludes []string) (runner.Package, error) {
	p, err := raysubmit.BuildPackage(ctx, dir, raysubmit.PackageOptions{Excludes: excludes})
	if err != nil {
		return nil, err
	}
	return zipped{p}, nil
}

// zipped is a raysubmit.Package as a runner.Package.
type zipped struct{ *raysubmit.Package }

func (z zipped) Bytes() int64 { return z.Size }

// UploadPackage uploads a package Pack built unless the cluster has it.
func (j Jobs) UploadPackage(ctx context.Context, p runner.Package) error {
	z, ok := p.(zipped)
	if !ok {
		return fmt.Errorf("package %s: not built by adapters.Pack", p.URI())
	}
	return j.Client.UploadPackage(ctx, z.Package)
}

// Submit submits r; a taken submission id wraps runner.ErrAlreadySubmitted.
func (j Jobs) Submit(ctx context.Context, r runner.JobRequest) (string, error) {
	resp, err := j.Client.Submit(ctx, raysubmit.SubmitRequest{
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

// Get returns what Ray says about a job; an unknown job wraps runner.ErrNotFound.
func (j Jobs) Get(ctx context.Context, id string) (runner.JobInfo, error) {
	d, err := j.Client.Get(ctx, id)
	if err != nil {
		return runner.JobInfo{}, notFound(err)
	}
	return runner.JobInfo{JobID: d.JobID, Status: runner.JobStatus(d.Status), Message: d.Message,
		DriverExitCode: d.DriverExitCode, Start: d.Started(), End: d.Ended()}, nil
}

// Nodes returns the utilization of the cluster's alive nodes.
func (j Jobs) Nodes(ctx context.Context) ([]runner.NodeSample, error) {
	nodes, err := j.Client.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]runner.NodeSample, len(nodes))
	for i, n := range nodes {
		out[i] = runner.NodeSample{Node: n.Name, CPU: n.CPU, Mem: n.Mem, GPU: n.GPU, At: n.At}
	}
	return out, nil
}

// Stop asks Ray to stop a job; an unknown job wraps runner.ErrNotFound.
func (j Jobs) Stop(ctx context.Context, id string) (bool, error) {
	ok, err := j.Client.Stop(ctx, id)
	return ok, notFound(err)
}

// Tail follows the job's log line by line until it ends; a dashboard that
// stopped answering for too long wraps runner.ErrUnreachable.
func (j Jobs) Tail(ctx context.Context, id string, onLine func(string), onOutage func(runner.Outage)) error {
	var report func(raysubmit.Outage)
	if onOutage != nil {
		report = func(o raysubmit.Outage) { onOutage(runner.Outage{For: o.For, Limit: o.Limit, Err: o.Err}) }
	}
	err := j.Client.FollowLines(ctx, id, func(b []byte) error { onLine(string(b)); return nil }, report)
	if errors.Is(err, raysubmit.ErrUnreachable) {
		return unreachableError{err}
	}
	return err
}

// unreachableError is raysubmit's give-up on a dashboard, which the
// runner knows as runner.ErrUnreachable.
type unreachableError struct{ err error }

func (e unreachableError) Error() string        { return e.err.Error() }
func (e unreachableError) Unwrap() error        { return e.err }
func (e unreachableError) Is(target error) bool { return target == runner.ErrUnreachable }

func notFound(err error) error {
	if errors.Is(err, raysubmit.ErrNotFound) {
		return fmt.Errorf("%w: %w", runner.ErrNotFound, err)
	}
	return err
}

// Session is runner.Session over an open pipes.Session.
type Session struct {
	// Pipes is the open session messages go to.
	Pipes *pipes.Session
}

var _ runner.Session = Session{}

// Send writes one message; a refused message wraps pipes.ErrInvalidMessage
// (which is runner.ErrInvalidMessage).
func (s Session) Send(m *pipes.Message) error { return s.Pipes.Forward(m) }

// Close sends "closed", with exc when the step failed.
func (s Session) Close(exc *runner.Exception) error { return s.Pipes.Close(Exception(exc)) }

// Exception converts the runner's exception to the Pipes one, chain included.
func Exception(e *runner.Exception) *pipes.Exception {
	if e == nil {
		return nil
	}
	var name *string
	if e.Name != "" {
		name = &e.Name
	}
	stack := e.Stack
	if stack == nil {
		stack = []string{}
	}
	return &pipes.Exception{Message: e.Message, Stack: stack, Name: name, Cause: Exception(e.Cause), Context: Exception(e.Context)}
}
