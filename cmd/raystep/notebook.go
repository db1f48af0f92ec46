package main

import (
	"github.com/spf13/cobra"
)

func (a *app) notebookCommand() *cobra.Command {
	var o reachOptions
	cmd := &cobra.Command{
		Use:   "notebook NAME [--port N]",
		Short: "Reach the Jupyter notebook of an interactive cluster, until Ctrl-C",
		Long: `notebook opens a port-forward from 127.0.0.1 to the Jupyter server that
raystep up --notebook started on the head of the interactive cluster NAME,
waits until it answers, prints its URL with its token on stdout and holds
the forward until Ctrl-C or SIGTERM, then closes it and exits 0. The
server listens on the head's loopback only: the port-forward (which needs
the pods/portforward permission) and its token are the way in.

A cluster brought up without --notebook has none (exit 2): run
raystep up --notebook --name NAME, which starts one on the live cluster.

On the local backend (the default) the server listens on this machine's
loopback already: notebook prints its URL with its token and returns.`,
		Example: "  raystep notebook alice-dev\n  raystep notebook -n ml-ads alice-dev --port 8888",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return a.notebook(cmd, o, args[0]) },
	}
	reachFlags(cmd, &o)
	return cmd
}

// notebook prints the URL of the cluster's notebook with its token and
// holds the way to it open, if there is one to hold.
func (a *app) notebook(cmd *cobra.Command, o reachOptions, name string) error {
	s, err := a.site(cmd, "notebook")
	if err != nil {
		return err
	}
	return s.Notebook(cmd.Context(), name, o.port)
}
