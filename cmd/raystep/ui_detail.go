package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
)

// uiHeads is how raystep ui reaches the dashboards of the clusters it
// shows: a local head by its record on this machine, a KubeRay cluster
// as a step would (cluster DNS in a pod, else a port-forward kept by
// heads) with the platform's dashboard headers. Without clients (nothing
// points at Kubernetes) only local heads are reached.
func (a *app) uiHeads(clients *kuberay.Clients, kc *kubeConfig) (ui.Reach, *ui.KubeHeads) {
	headers := http.Header{}
	heads := &ui.KubeHeads{}
	if clients != nil {
		for k, v := range kc.DashboardHeaders {
			headers.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		heads.Interactive = &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Notify: a.notices()}
		heads.Config, heads.InCluster = clients.Config, clients.InCluster && kc.InCluster
	}
	return func(ctx context.Context, r *ui.Record) (ui.Head, error) {
		if r.Namespace != "" {
			if heads.Interactive == nil {
				return ui.Head{}, fmt.Errorf("%s %s/%s: no Kubernetes to reach it through: %w", r.ClusterKind, r.Namespace, r.Name, ui.ErrNoDashboard)
			}
			h, err := heads.Reach(ctx, r)
			h.Headers = headers
			return h, err
		}
		if r.ClusterKind == fleet.KindStep {
			return a.reachLocalStep(r.Name)
		}
		in, err := a.runningLocal("ui", r.Name)
		if err != nil {
			return ui.Head{}, fmt.Errorf("%w: %w", ui.ErrNoDashboard, err)
		}
		token, err := readToken(in.TokenFile)
		if err != nil {
			return ui.Head{}, fmt.Errorf("read the token of local cluster %s from %s: %w", in.Name, in.TokenFile, err)
		}
		return ui.Head{URL: in.DashboardURL, Token: token}, nil
	}, heads
}

// reachLocalStep reaches the private head of the running local step id.
func (a *app) reachLocalStep(id string) (ui.Head, error) {
	mine, err := a.localFleet()
	if err != nil {
		return ui.Head{}, err
	}
	var steps []local.StepRecord
	if mine.StepsDir != "" {
		if steps, err = local.ListSteps(mine.StepsDir); err != nil {
			return ui.Head{}, err
		}
	}
	for _, st := range steps {
		if st.ID != id {
			continue
		}
		token, err := readToken(st.TokenFile)
		if err != nil {
			return ui.Head{}, fmt.Errorf("read the token of local step %s from %s: %w", id, st.TokenFile, err)
		}
		return ui.Head{URL: st.DashboardURL, Token: token}, nil
	}
	return ui.Head{}, fmt.Errorf("local step %s has ended: %w", id, ui.ErrNoDashboard)
}
