package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/spf13/cobra"
)

// uiHeads is how raystep ui reaches the dashboards of the clusters it
// shows: a local head by its record on this machine, a KubeRay cluster
// as a step would (cluster DNS in a pod, else a port-forward kept by
// heads) with the platform's dashboard headers. Without clients (nothing
// points at Kubernetes) only local heads are reached.
func (a *app) uiHeads(cmd *cobra.Command, clients *kuberay.Clients) (ui.Reach, *ui.KubeHeads) {
	opts := a.dashboardOptions()
	heads := &ui.KubeHeads{}
	if clients != nil {
		heads.Interactive = &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Notify: a.notices()}
		heads.Config, heads.InCluster = clients.Config, clients.InCluster && opts.InCluster
	}
	mine := a.localSite(cmd)
	mine.Given = nil // ui's flags are not the ones a local cluster refuses
	return func(ctx context.Context, r *ui.Record) (ui.Head, error) {
		if r.Backend != fleet.BackendLocal {
			if heads.Interactive == nil {
				return ui.Head{}, fmt.Errorf("%s %s/%s: no Kubernetes to reach it through: %w", r.ClusterKind, r.Namespace, r.Name, ui.ErrNoDashboard)
			}
			h, err := heads.Reach(ctx, r)
			h.Headers = opts.Headers
			return h, err
		}
		url, token, err := mine.Head(r.Record)
		if errors.Is(err, fleet.ErrNotFound) || errors.Is(err, fleet.ErrUsage) {
			err = fmt.Errorf("%w: %w", ui.ErrNoDashboard, err)
		}
		return ui.Head{URL: url, Token: token}, err
	}, heads
}
