package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
)

// borrow points the KubeRay backend b at the interactive cluster named
// name in the step's namespace (`run --cluster`): the step runs there and
// never deletes it. The step reports the cluster's GPUs, not the spec's,
// and a notice tells the user the spec's cluster section is not used.
func (a *app) borrow(ctx context.Context, b runner.Backend, step *runner.Step, name string) error {
	kb, ok := b.(*kuberay.Backend)
	if !ok {
		return errors.New("run --cluster: not a KubeRay backend")
	}
	i := &kuberay.Interactive{Kube: kb.Kube, Ray: kb.Ray, KeepDir: a.keepDir()}
	rc, err := i.Find(ctx, step.Namespace, name)
	if err != nil {
		return fmt.Errorf("run --cluster: %w", err)
	}
	if kb.Dashboard.Token == "" {
		if kb.Dashboard.Token, err = i.ReadToken(ctx, rc); err != nil {
			return fmt.Errorf("run --cluster: %w", err)
		}
	}
	kb.Cluster = rc.Name
	step.Shape = "interactive cluster " + rc.Namespace + "/" + rc.Name
	step.GPUType, step.GPUCount = gpusOf(rc.Annotations[kuberay.AnnotationGPUs])
	step.Notices = append(step.Notices, fmt.Sprintf("runs on interactive cluster %s/%s, which it borrows: "+
		"the step never deletes it, and the spec's cluster section is not used", rc.Namespace, rc.Name))
	return nil
}

// gpusOf reads the first GPU type and its count from a "type=count,..."
// summary; "" and 0 for none.
func gpusOf(summary string) (string, int) {
	first, _, _ := strings.Cut(summary, ",")
	typ, count, ok := strings.Cut(first, "=")
	n, err := strconv.Atoi(count)
	if !ok || err != nil {
		return "", 0
	}
	return typ, n
}
