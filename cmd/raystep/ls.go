package main

import (
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/spf13/cobra"

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
	rows, err := a.kubeRows(cmd, o)
	if err != nil {
		return err
	}
	var mine []local.Interactive
	var steps []local.StepRecord
	if o.namespace == "" { // local clusters have no namespace
		if _, mine, err = a.recordedClusters(); err != nil {
			return err
		}
		if steps, err = a.localSteps(); err != nil {
			return err
		}
	}
	for _, st := range steps {
		rows = append(rows, summarizeLocalStep(st))
	}
	for _, in := range mine {
		rows = append(rows, summarizeLocal(in))
	}
	if o.output == "json" {
		return kuberay.WriteJSON(a.stdout, rows)
	}
	return kuberay.WriteTable(a.stdout, rows, kuberay.TableOptions{AllNamespaces: o.allNamespaces, Wide: o.output == "wide", Now: o.now()})
}

// kubeRows are ls's rows from Kubernetes: steps' RayJobs, then
// interactive RayClusters; none when nothing points at Kubernetes
// (skipKube) and no --namespace asks for it.
func (a *app) kubeRows(cmd *cobra.Command, o lsOptions) ([]kuberay.Summary, error) {
	clients, ns, jobs, err := a.rayJobs(cmd, "ls", o.namespace, o.allNamespaces)
	if a.skipKube(err) && o.namespace == "" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	clusters, err := kuberay.ListClusters(cmd.Context(), clients.Ray, ns)
	if err != nil {
		return nil, err
	}
	rows := make([]kuberay.Summary, 0, len(jobs)+len(clusters))
	for i := range jobs {
		rows = append(rows, kuberay.Summarize(&jobs[i]))
	}
	for i := range clusters {
		rows = append(rows, kuberay.SummarizeCluster(&clusters[i]))
	}
	return rows, nil
}

// rayJobs connects and lists raystep's RayJobs for ls and gc: in every
// namespace with all, else in the flag's, $RAYSTEP_NAMESPACE, the
// profile's or the kubeconfig's namespace, in that order. It returns the
// namespace it listed ("" for all).
func (a *app) rayJobs(cmd *cobra.Command, name, flag string, all bool) (*kuberay.Clients, string, []rayv1.RayJob, error) {
	if all && flag != "" {
		return nil, "", nil, &usageError{fmt.Errorf("%s: -A and --namespace exclude each other", name)}
	}
	clients, _, err := a.kube(name)
	if err != nil {
		return nil, "", nil, err
	}
	ns := ""
	if !all {
		profile, err := a.profile(cmd)
		if err != nil {
			return nil, "", nil, err
		}
		ns = kuberay.ResolveNamespace(kuberay.Namespaces{Flag: flag, Env: a.cfg.Namespace, Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
	}
	jobs, err := kuberay.ListRayJobs(cmd.Context(), clients.Ray, ns)
	return clients, ns, jobs, err
}
