package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
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

// down deletes the named interactive clusters of the backend asked for.
func (a *app) down(cmd *cobra.Command, o downOptions, names []string) error {
	k, err := a.keeper(cmd, "down", o.backend, o.namespace)
	if err != nil {
		return err
	}
	return k.Down(cmd.Context(), names, func(msg string) { fmt.Fprintln(a.stdout, msg) })
}

// keeper is the interactive clusters of the backend that --backend (or
// RAYSTEP_BACKEND) names, for the command name: this machine's, or those
// of a Kubernetes namespace (--namespace, RAYSTEP_NAMESPACE, the
// profile's, the kubeconfig's). Tests replace it (app.newKeeper).
func (a *app) keeper(cmd *cobra.Command, name, backend, namespace string) (fleet.Keeper, error) {
	if a.newKeeper != nil {
		return a.newKeeper(cmd, name)
	}
	switch b := firstNonEmpty(backend, a.cfg.Backend); b {
	case "local":
		if cmd.Flags().Changed("namespace") {
			return nil, &fleet.UnsupportedError{Command: name, Flag: "--namespace", Backend: b, Hint: "drop it, or use --backend kuberay"}
		}
		return local.Keeper{Open: a.localClusters}, nil
	case "kuberay":
		return kuberay.Keeper{Connect: func() (*kuberay.Interactive, string, error) {
			profile, err := a.profile(cmd)
			if err != nil {
				return nil, "", err
			}
			clients, _, err := a.kube(name)
			if err != nil {
				return nil, "", err
			}
			ns := kuberay.ResolveNamespace(kuberay.Namespaces{Flag: namespace, Env: a.cfg.Namespace,
				Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
			return &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Notify: a.notices()}, ns, nil
		}}, nil
	default:
		return nil, &usageError{fmt.Errorf("--backend %q: want local or kuberay", b)}
	}
}
