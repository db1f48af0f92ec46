package main

import (
	"github.com/spf13/cobra"
)

// reachOptions are the flags of dashboard and notebook.
type reachOptions struct {
	namespace string
	port      uint16
}

func (a *app) dashboardCommand() *cobra.Command {
	var o reachOptions
	cmd := &cobra.Command{
		Use:   "dashboard NAME [--port N]",
		Short: "Reach the Ray dashboard of an interactive cluster, until Ctrl-C",
		Long: `dashboard opens a port-forward from 127.0.0.1 to the Ray dashboard of the
interactive cluster NAME (made by raystep up), prints its URL on stdout
and holds the forward until Ctrl-C or SIGTERM, then closes it and exits 0.
With RAYSTEP_DASHBOARD_URL set, or when raystep runs in the cluster, it
prints the dashboard's address and returns: there is nothing to forward.
On the local backend (the default) it prints the head's dashboard and
where its token is, and returns.`,
		Example: "  raystep dashboard alice-dev\n  raystep dashboard -n ml-ads alice-dev --port 8265",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return a.dashboard(cmd, o, args[0]) },
	}
	reachFlags(cmd, &o)
	return cmd
}

// reachFlags adds the flags dashboard and notebook share.
func reachFlags(cmd *cobra.Command, o *reachOptions) {
	addBackendFlag(cmd)
	f := cmd.Flags()
	namespaceFlag(f, &o.namespace, "n", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.Uint16Var(&o.port, "port", 0, "local port of the forward (default a free one)")
}

// dashboard prints the address of the cluster's dashboard and holds the
// way to it open, if there is one to hold.
func (a *app) dashboard(cmd *cobra.Command, o reachOptions, name string) error {
	s, err := a.site(cmd, "dashboard")
	if err != nil {
		return err
	}
	return s.Dashboard(cmd.Context(), name, o.port)
}
