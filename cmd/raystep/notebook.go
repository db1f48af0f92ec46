package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/spf13/cobra"

	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

// notebookWait bounds the wait until a notebook answers: its job may
// install the profile's packages first.
const notebookWait = 10 * time.Minute

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

// notebook prints the notebook's URL and holds its port-forward.
func (a *app) notebook(cmd *cobra.Command, o reachOptions, name string) error {
	if local, err := a.reachLocal(cmd, "notebook", o, name); local || err != nil {
		if err != nil {
			return err
		}
		return a.notebookLocal(cmd.Context(), name)
	}
	r, err := a.findReached(cmd, "notebook", o, name)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	s, err := r.i.ReadNotebook(ctx, r.rc)
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	st, closeRay, err := a.notebookStarter(ctx, r, nil)
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	defer closeRay()
	rf := &reforward{r: r, local: o.port, remote: uint16(s.Port)}
	defer rf.close()
	wctx, cancel := context.WithTimeout(ctx, notebookWait)
	defer cancel()
	if err := st.Await(wctx, rf.base, s); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C while waiting: nothing is left open
		}
		return fmt.Errorf("notebook: %w", err)
	}
	fwd := rf.fwd
	fmt.Fprintln(a.stdout, s.URL(fwd.URL))
	fmt.Fprintf(a.stderr, "port-forward to pod %s/%s open: Ctrl-C closes it\n", r.rc.Namespace, fwd.Pod)
	return a.hold(ctx, fwd, "notebook")
}

// notebookStarter is a notebook.Starter on the dashboard of r's cluster,
// reached as dashboard reaches it, and the function that closes its
// port-forward, if any.
func (a *app) notebookStarter(ctx context.Context, r *reached, p *schemas.NotebookProfile) (*notebook.Starter, func(), error) {
	token := a.cfg.DashboardToken
	if token == "" {
		var err error
		if token, err = r.i.ReadToken(ctx, r.rc); err != nil {
			return nil, nil, err
		}
	}
	url, done := a.cfg.DashboardURL, func() {}
	switch {
	case url != "":
	case r.clients.InCluster && r.kc.InCluster:
		url = kuberay.ClusterDashboardURL(r.rc)
	default:
		fwd, err := r.i.ForwardHead(ctx, r.clients.Config, r.rc, 0, kuberay.DashboardPort(r.rc))
		if err != nil {
			return nil, nil, err
		}
		url, done = fwd.URL, fwd.Close
	}
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url, Token: token, UserAgent: "raystep/" + version})
	if err != nil {
		done()
		return nil, nil, err
	}
	st := &notebook.Starter{Ray: c, Cluster: r.rc.Name}
	if p != nil {
		st.Pip = p.Pip
	}
	return st, done, nil
}

// upNotebook starts the notebook on the ready cluster rc (or finds the
// one that runs there), waits until it answers through a port-forward and
// tells the user how to reach it. A notebook that does not start fails up
// but leaves the cluster, which is ready and usable, for down to delete.
func (a *app) upNotebook(ctx context.Context, r *reached, profile *schemas.Profile) error {
	p := profile.Spec.Interactive.Notebook
	fresh, err := notebook.NewServer(p)
	if err != nil {
		return err
	}
	s, err := r.i.KeepNotebook(ctx, r.rc, fresh)
	if err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	st, closeRay, err := a.notebookStarter(ctx, r, &p)
	if err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	defer closeRay()
	started, err := st.Start(ctx, s)
	if err != nil {
		return fmt.Errorf("up --notebook: %w (the cluster stays: raystep down %s deletes it)", err, r.rc.Name)
	}
	if started {
		fmt.Fprintf(a.stderr, "notebook job %s submitted: waiting until it answers\n", notebook.SubmissionID(r.rc.Name))
	}
	if err := a.awaitNotebook(ctx, r, st, s); err != nil {
		return fmt.Errorf("up --notebook: %w (the cluster stays: raystep down %s deletes it)", err, r.rc.Name)
	}
	if err := r.i.MarkNotebook(ctx, r.rc, s); err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	fmt.Fprintf(a.stdout, "Notebook: raystep notebook %s -n %s (prints its URL with its token, and holds the port-forward)\n", r.rc.Name, r.rc.Namespace)
	return nil
}

// awaitNotebook waits until the notebook answers through a port-forward
// it closes again.
func (a *app) awaitNotebook(ctx context.Context, r *reached, st *notebook.Starter, s notebook.Server) error {
	rf := &reforward{r: r, remote: uint16(s.Port)}
	defer rf.close()
	wctx, cancel := context.WithTimeout(ctx, notebookWait)
	defer cancel()
	return st.Await(wctx, rf.base, s)
}

// reforward is a port-forward to the notebook's port that base opens
// again, on the same local port, when it ended for good. (A HeadForward
// opens itself again when the head refuses a connection, as it does until
// the server listens; it ends only when it cannot.)
type reforward struct {
	r             *reached
	local, remote uint16
	fwd           *kuberay.HeadForward
}

// base returns the URL of a working forward, opening one if needed.
func (f *reforward) base(ctx context.Context) (string, error) {
	if f.fwd != nil {
		select {
		case <-f.fwd.Done():
			f.fwd = nil
		default:
			return f.fwd.URL, nil
		}
	}
	fwd, err := f.r.i.ForwardHead(ctx, f.r.clients.Config, f.r.rc, f.local, f.remote)
	if err != nil {
		return "", err
	}
	f.fwd = fwd
	if u, err := url.Parse(fwd.URL); err == nil {
		if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
			f.local = uint16(p) // the URL printed stays the same
		}
	}
	return fwd.URL, nil
}

// close closes the forward, if any.
func (f *reforward) close() {
	if f.fwd != nil {
		f.fwd.Close()
	}
}

// reachedUp is the cluster up made, for upNotebook.
func (a *app) reachedUp(i *kuberay.Interactive, clients *kuberay.Clients, kc *kubeConfig, rc *rayv1.RayCluster) *reached {
	return &reached{i: i, clients: clients, kc: kc, rc: rc}
}
