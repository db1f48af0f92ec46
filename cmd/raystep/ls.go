package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
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
