package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/schemas"
)

// On the local backend a cluster's dashboard and notebook listen on this
// machine's loopback already: dashboard and notebook print their address
// and return, there is no forward to hold. The notebook's record (its
// port and token, 0600) lives in the head's temp dir, which its
// supervisor removes when the head stops (down, expiry): a stopped
// cluster leaves no notebook token behind.

// localNotebookFile is where the local cluster in keeps its notebook.
func localNotebookFile(in local.Interactive) string {
	return filepath.Join(in.TempDir, "raystep-notebook.json")
}

// hasLocalNotebook says whether up --notebook gave the local cluster in a
// notebook (its record exists; the token in it is not read here).
func hasLocalNotebook(in local.Interactive) bool {
	_, err := os.Stat(localNotebookFile(in))
	return err == nil
}

// runningLocal returns the running local cluster name, for what
// (dashboard, notebook): an unknown name is exit 2, as for down.
func (a *app) runningLocal(what, name string) (local.Interactive, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return local.Interactive{}, &usageError{err}
	}
	in, err := (&local.Clusters{Dir: dir}).Get(name)
	if err != nil {
		return in, fmt.Errorf("%s: %w", what, err)
	}
	if in.Status != local.StatusRunning {
		return in, &usageError{fmt.Errorf("%s %s: the local cluster is %s, not running (raystep up --name %s starts it again)",
			what, name, in.Status, name)}
	}
	return in, nil
}

// dashboardLocal prints the local cluster's dashboard and its token file.
func (a *app) dashboardLocal(name string) error {
	in, err := a.runningLocal("dashboard", name)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, in.DashboardURL)
	fmt.Fprintf(a.stderr, "the dashboard asks for the head's token: export RAY_AUTH_TOKEN=$(cat %s)\n", in.TokenFile)
	return nil
}

// notebookLocal waits until the local cluster's notebook answers and
// prints its URL with its token.
func (a *app) notebookLocal(ctx context.Context, name string) error {
	in, err := a.runningLocal("notebook", name)
	if err != nil {
		return err
	}
	s, err := notebook.ReadFile(localNotebookFile(in))
	if errors.Is(err, notebook.ErrNone) {
		return fmt.Errorf("notebook: local cluster %s has %w: raystep up --notebook --name %s starts one on it", name, notebook.ErrNone, name)
	}
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	st, err := a.localStarter(in, nil)
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	base := loopbackURL(s.Port)
	wctx, cancel := context.WithTimeout(ctx, notebookWait)
	defer cancel()
	if err := st.Await(wctx, func(context.Context) (string, error) { return base, nil }, s); err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	fmt.Fprintln(a.stdout, s.URL(base))
	return nil
}

// upNotebookLocal starts the notebook on the ready local cluster in (or
// finds the one that runs there), on a free port of this machine's
// loopback, and waits until it answers. As on KubeRay, a notebook that
// does not start fails up but leaves the cluster.
func (a *app) upNotebookLocal(ctx context.Context, in local.Interactive, profile *schemas.Profile) error {
	p := profile.Spec.Interactive.Notebook
	path := localNotebookFile(in)
	s, err := notebook.ReadFile(path)
	if errors.Is(err, notebook.ErrNone) {
		if s, err = notebook.NewServer(p); err == nil {
			// Not the profile's port: clusters on one machine share its
			// loopback, and a fixed port would let only one have a notebook.
			if s.Port, err = freeLoopbackPort(); err == nil {
				err = notebook.WriteFile(path, s)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	st, err := a.localStarter(in, &p)
	if err == nil {
		err = notebook.WriteToken(st.TokenFile, s.Token)
	}
	if err == nil {
		var started bool
		if started, err = st.Start(ctx, s); err == nil && started {
			fmt.Fprintf(a.stderr, "notebook job %s submitted: waiting until it answers\n", notebook.SubmissionID(in.Name))
		}
	}
	if err == nil {
		base := loopbackURL(s.Port)
		wctx, cancel := context.WithTimeout(ctx, notebookWait)
		err = st.Await(wctx, func(context.Context) (string, error) { return base, nil }, s)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("up --notebook: %w (the cluster stays: raystep down %s stops it)", err, in.Name)
	}
	fmt.Fprintf(a.stdout, "Notebook: raystep notebook %s (prints its URL with its token)\n", in.Name)
	return nil
}

// localStarter is a notebook.Starter on the local cluster's Jobs API.
func (a *app) localStarter(in local.Interactive, p *schemas.NotebookProfile) (*notebook.Starter, error) {
	token, err := readToken(in.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("read the token of local cluster %s from %s: %w", in.Name, in.TokenFile, err)
	}
	c, err := raysubmit.New(raysubmit.Config{BaseURL: in.DashboardURL, Token: token, UserAgent: "raystep/" + version})
	if err != nil {
		return nil, err
	}
	st := &notebook.Starter{Ray: c, Cluster: in.Name, TokenFile: filepath.Join(in.TempDir, "raystep-notebook-token")}
	if p != nil {
		st.Pip = p.Pip
	}
	return st, nil
}

func loopbackURL(port int) string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// freeLoopbackPort is a port of 127.0.0.1 that nothing listens on now.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port for the notebook: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
