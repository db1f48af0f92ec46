package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/raystep/raystep/runner/kuberay"
)

// downOptions are down's flags.
type downOptions struct{ namespace, backend string }

func (a *app) downCommand() *cobra.Command {
	var o downOptions
	var run downRunOptions
	cmd := &cobra.Command{
		Use:   "down NAME... | down --dagster-run-id ID",
		Short: "Delete interactive clusters and wait until they are gone",
		Long: `down deletes each interactive cluster named (made by raystep up) and waits
until it is gone. It looks every name up first and deletes nothing when
one of them is not a raystep interactive cluster (exit 2).

On the local backend (the default) it stops each cluster's private head
and returns once every process of it has exited and its temp dir is
removed. On the KubeRay backend (--backend kuberay) it waits until the
RayCluster and its pods are gone; a step's cluster or anyone else's
RayCluster is never touched.`,
		Example: "  raystep down alice-dev\n  raystep down -n ml-ads alice-dev bob-eval",
		Args:    func(cmd *cobra.Command, names []string) error { return downArgs(cmd, run, names) },
		RunE: func(cmd *cobra.Command, names []string) error {
			if run.runID != "" {
				return a.downRun(cmd, run, o.namespace)
			}
			return a.down(cmd, o, names)
		},
	}
	run.register(cmd)
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's; KubeRay only)")
	cmd.Flags().StringVar(&o.backend, "backend", "", "local or kuberay (default $RAYSTEP_BACKEND, else local)")
	return cmd
}

// down checks the names, finds every cluster, then deletes them all at
// once and waits for each.
func (a *app) down(cmd *cobra.Command, o downOptions, names []string) error {
	switch b := firstNonEmpty(o.backend, a.cfg.Backend); b {
	case "kuberay":
	case "local":
		return a.downLocal(cmd, names)
	default:
		return &usageError{fmt.Errorf("--backend %q: want local or kuberay", b)}
	}
	for _, n := range names {
		if msgs := validation.IsDNS1035Label(n); len(msgs) > 0 {
			return &usageError{fmt.Errorf("down: %q is not a cluster name: %s", n, strings.Join(msgs, "; "))}
		}
	}
	profile, err := a.profile(cmd)
	if err != nil {
		return err
	}
	clients, _, err := a.kube("down")
	if err != nil {
		return err
	}
	ns := kuberay.ResolveNamespace(kuberay.Namespaces{Flag: o.namespace, Env: a.cfg.Namespace,
		Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
	i := &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Notify: a.notices()}
	ctx := cmd.Context()
	var found []*rayv1.RayCluster
	var errs []error
	for _, n := range names {
		rc, err := i.Find(ctx, ns, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("down: %w", err))
			continue
		}
		found = append(found, rc)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	errs = make([]error, len(found))
	var wg sync.WaitGroup
	var mu sync.Mutex // the lines of the deletes that end together
	for k, rc := range found {
		wg.Go(func() {
			if errs[k] = i.Delete(ctx, rc.Namespace, rc.Name, rc.UID); errs[k] == nil {
				_ = i.Forget(rc.Namespace, rc.Name) // the tokens of a cluster that is gone
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(a.stdout, "RayCluster %s/%s deleted\n", rc.Namespace, rc.Name)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
