package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
)

// lsOptions are ls's flags.
type lsOptions struct {
	namespace     string
	allNamespaces bool
	output        string
	now           func() time.Time
}

func (a *app) lsCommand() *cobra.Command {
	o := lsOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "ls [-A] [-o wide|json]",
		Short: "List raystep's clusters: steps and interactive ones, owner, GPUs, status, age, expiry, dashboard",
		Long: `ls lists the clusters raystep created (label app.kubernetes.io/managed-by=raystep)
in the namespace given by --namespace, $RAYSTEP_NAMESPACE, the profile or the
kubeconfig, or in every namespace with -A: steps' RayJobs first (KIND step,
TYPE the spec's kind), then interactive RayClusters made by up (KIND
interactive, with their expiry), then the local backend's interactive
clusters on this machine (KIND interactive, no namespace, DEPLOYMENT
ready, expired or gone; left out with --namespace). Without a kubeconfig, and unless RAYSTEP_BACKEND
is kuberay, ls lists the local clusters only. -o json carries the same,
KIND as clusterKind.`,
		Example: "  raystep ls -A\n  raystep ls -n ml-ads -o json",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.ls(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list every namespace")
	f.StringVarP(&o.output, "output", "o", "", "output format: wide or json (default a table)")
	return cmd
}

func (a *app) ls(cmd *cobra.Command, o lsOptions) error {
	if o.output != "" && o.output != "wide" && o.output != "json" {
		return &usageError{fmt.Errorf("ls: -o %q: want wide or json", o.output)}
	}
	scope, err := fleetScope("ls", o.namespace, o.allNamespaces)
	if err != nil {
		return err
	}
	fleets, err := a.fleets(cmd, "ls")
	if err != nil {
		return err
	}
	rows, err := fleet.List(cmd.Context(), fleets, scope)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return fleet.WriteJSON(a.stdout, rows)
	}
	return fleet.WriteTable(a.stdout, rows, fleet.TableOptions{AllNamespaces: o.allNamespaces, Wide: o.output == "wide", Now: o.now()})
}

// fleetScope is where ls, gc and ui look: --namespace, or -A.
func fleetScope(name, namespace string, all bool) (fleet.Scope, error) {
	if all && namespace != "" {
		return fleet.Scope{}, &usageError{fmt.Errorf("%s: -A and --namespace exclude each other", name)}
	}
	return fleet.Scope{Namespace: namespace, All: all}, nil
}

// fleets are the backends' clusters as ls and gc ask them, in the order
// they list them: Kubernetes's, then this machine's. Tests replace it
// (app.newFleets).
func (a *app) fleets(cmd *cobra.Command, name string) ([]fleet.Fleet, error) {
	if a.newFleets != nil {
		return a.newFleets(cmd, name)
	}
	mine, err := a.localFleet()
	if err != nil {
		return nil, err
	}
	return []fleet.Fleet{a.kubeFleet(cmd, name, nil), mine}, nil
}

// kubeFleet is raystep's clusters on Kubernetes, for the command name;
// kc, if not nil, receives the Kubernetes settings once connected.
func (a *app) kubeFleet(cmd *cobra.Command, name string, kc **kubeConfig) *kuberay.Fleet {
	return &kuberay.Fleet{
		Connect: func() (*kuberay.Clients, error) {
			c, k, err := a.kube(name)
			if kc != nil {
				*kc = k
			}
			return c, err
		},
		Required: a.cfg.Backend == "kuberay",
		Namespace: func(kubeconfig string) (string, error) {
			profile, err := a.profile(cmd)
			if err != nil {
				return "", err
			}
			return kuberay.ResolveNamespace(kuberay.Namespaces{Env: a.cfg.Namespace, Profile: profile.Spec.Namespace, Kubeconfig: kubeconfig}), nil
		},
		Warn: func(msg string) { fmt.Fprintf(a.stderr, "%s: %s\n", name, msg) },
	}
}

// localFleet is this machine's private heads: none recorded when there is
// no state dir, where no up or step can have recorded one.
func (a *app) localFleet() (*local.Fleet, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return &local.Fleet{}, nil
	}
	f := &local.Fleet{StepsDir: local.StepsDir(dir)}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if f.Clusters, err = a.localClusters(); err != nil {
		return nil, err
	}
	return f, nil
}
