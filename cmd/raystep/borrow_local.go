package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/local"
)

// borrowLocal builds the local backend for `run --cluster NAME`: the step
// runs on the running local interactive cluster name as on any existing
// cluster (local.Backend with its dashboard URL and token), which never
// stops it, and the step is resolved for that. RAY_ADDRESS and the other
// variables that name an existing cluster are not used: --cluster says
// which one. A name with no record is ErrNotFound and a cluster that no
// longer runs a usage error: exit 2, nothing started. A cluster that
// expires or goes while the step runs fails the step at once (exit 3).
func (a *app) borrowLocal(step runner.Step, name string) (runner.Step, runner.Backend, error) {
	c, err := a.localClusters()
	if err != nil {
		return runner.Step{}, nil, err
	}
	in, err := c.Get(name)
	if err != nil {
		return runner.Step{}, nil, fmt.Errorf("run --cluster: %w (raystep up --name %s starts it)", err, name)
	}
	if in.Status != local.StatusRunning {
		return runner.Step{}, nil, &usageError{fmt.Errorf("run --cluster %s: the local cluster is %s, not running "+
			"(raystep up --name %s starts it again)", name, in.Status, name)}
	}
	token, err := readToken(in.TokenFile)
	if err == nil && token == "" {
		err = errors.New("the file is empty")
	}
	if err != nil {
		return runner.Step{}, nil, fmt.Errorf("run --cluster %s: read the token of the local cluster from %s: %w",
			name, in.TokenFile, err)
	}
	b := &local.Backend{
		DashboardURL: in.DashboardURL, Token: token, TokenFrom: "the token file of local cluster " + name,
		Head: rayhead.Options{RayBin: c.Head.RayBin}, Logger: a.log.Named("local"),
		Lost: func(ctx context.Context) error { return c.Lost(ctx, name) },
	}
	if a.cfg.LogLevel != "debug" {
		b.Logger = b.Logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	step = resolveStep(step, placement{backend: "local", existing: true})
	step.Shape = "local interactive cluster " + name
	step.Notices = append(step.Notices, fmt.Sprintf("runs on local interactive cluster %s (expires %s), which it borrows: "+
		"the step never stops it, and the spec's cluster section is not used", name, in.Expires.Format(time.RFC3339)))
	return step, b, nil
}
