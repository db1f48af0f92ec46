package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner/kuberay"
)

// dashboardWait bounds the wait until the Ray dashboard answers through
// the port-forward `raystep dashboard` opened.
const dashboardWait = 2 * time.Minute

// reachOptions are the flags of dashboard and notebook.
type reachOptions struct {
	namespace, backend string
	port               uint16
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
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.StringVar(&o.backend, "backend", "", "local or kuberay (default $RAYSTEP_BACKEND, else local)")
	f.Uint16Var(&o.port, "port", 0, "local port of the forward (default a free one)")
}

// reached is an interactive cluster found for dashboard or notebook.
type reached struct {
	i       *kuberay.Interactive
	clients *kuberay.Clients
	kc      *kubeConfig
	rc      *rayv1.RayCluster
}

// findReached checks the name and the backend and finds the cluster.
func (a *app) findReached(cmd *cobra.Command, what string, o reachOptions, name string) (*reached, error) {
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return nil, &usageError{fmt.Errorf("%s: %q is not a cluster name: %s", what, name, strings.Join(msgs, "; "))}
	}
	switch b := firstNonEmpty(o.backend, a.cfg.Backend); b {
	case "kuberay":
	default:
		return nil, &usageError{fmt.Errorf("--backend %q: want local or kuberay", b)}
	}
	profile, err := a.profile(cmd)
	if err != nil {
		return nil, err
	}
	clients, kc, err := a.kube(what)
	if err != nil {
		return nil, err
	}
	ns := kuberay.ResolveNamespace(kuberay.Namespaces{Flag: o.namespace, Env: a.cfg.Namespace,
		Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
	i := &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Notify: a.notices()}
	rc, err := i.Find(cmd.Context(), ns, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &reached{i: i, clients: clients, kc: kc, rc: rc}, nil
}

// dashboard prints the dashboard's URL and holds its port-forward.
func (a *app) dashboard(cmd *cobra.Command, o reachOptions, name string) error {
	if local, err := a.reachLocal(cmd, "dashboard", o, name); local || err != nil {
		if err != nil {
			return err
		}
		return a.dashboardLocal(name)
	}
	r, err := a.findReached(cmd, "dashboard", o, name)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if url := a.cfg.DashboardURL; url != "" || r.clients.InCluster && r.kc.InCluster {
		if url == "" {
			url = kuberay.ClusterDashboardURL(r.rc)
		}
		fmt.Fprintln(a.stdout, url)
		return nil
	}
	fwd, err := r.i.ForwardHead(ctx, r.clients.Config, r.rc, o.port, kuberay.DashboardPort(r.rc))
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	defer fwd.Close()
	if err := awaitDashboard(ctx, fwd.URL); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("dashboard: the Ray dashboard of %s/%s does not answer through the port-forward to pod %s: %w",
			r.rc.Namespace, r.rc.Name, fwd.Pod, err)
	}
	fmt.Fprintln(a.stdout, fwd.URL)
	a.tokenHint(r.i, r.rc)
	fmt.Fprintf(a.stderr, "port-forward to pod %s/%s open: Ctrl-C closes it\n", r.rc.Namespace, fwd.Pod)
	return a.hold(ctx, fwd, "dashboard")
}

// awaitDashboard waits, for at most dashboardWait, until the Ray dashboard
// at url answers GET /api/version; any HTTP answer counts (under token
// auth it is 401). The URL is printed only then: the first connection
// through a fresh port-forward can find it broken (the forward then opens
// again on the same port), and a person's first page load should not be
// the one that does.
func awaitDashboard(ctx context.Context, url string) error {
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url, UserAgent: "raystep/" + version})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, dashboardWait)
	defer cancel()
	_, err = c.Version(wctx)
	var refused *raysubmit.APIError
	if err == nil || errors.As(err, &refused) || errors.Is(err, raysubmit.ErrNotFound) {
		return nil
	}
	return err
}

// hold waits until ctx ends (Ctrl-C, SIGTERM: a clean end) or the
// forward breaks (an error).
func (a *app) hold(ctx context.Context, fwd *kuberay.HeadForward, what string) error {
	select {
	case <-ctx.Done():
		fwd.Close()
		fmt.Fprintln(a.stderr, "port-forward closed")
		return nil
	case <-fwd.Done():
		return fmt.Errorf("%s: the port-forward to pod %s ended: %v (run the command again)", what, fwd.Pod, fwd.Err())
	}
}

// tokenHint says on stderr where the Ray token of a token-authenticated
// cluster is.
func (a *app) tokenHint(i *kuberay.Interactive, rc *rayv1.RayCluster) {
	if export := rayTokenExport(i, rc); export != "" {
		fmt.Fprintf(a.stderr, "the dashboard asks for the Ray token: %s\n", export)
	}
}

// rayTokenExport is the shell command that gives Ray's tools the token of
// rc: the copy up kept on this machine (its file, readable by the user
// only), else the Secret, for whoever may read it; "" without token auth.
func rayTokenExport(i *kuberay.Interactive, rc *rayv1.RayCluster) string {
	if rc.Spec.AuthOptions == nil || rc.Spec.AuthOptions.Mode != rayv1.AuthModeToken || rc.Spec.AuthOptions.SecretName == nil {
		return ""
	}
	if kept := i.KeptPath(rc, kuberay.KeptRayToken); kept != "" {
		return "export RAY_AUTH_TOKEN_PATH=" + shellQuote(kept)
	}
	return fmt.Sprintf("export RAY_AUTH_TOKEN=$(kubectl get secret -n %s %s -o jsonpath='{.data.%s}' | base64 -d)",
		rc.Namespace, *rc.Spec.AuthOptions.SecretName, kuberay.AuthTokenKey)
}

// reachLocal reports whether dashboard or notebook is on the local
// backend, after checking the name and the flags that only KubeRay has.
func (a *app) reachLocal(cmd *cobra.Command, what string, o reachOptions, name string) (bool, error) {
	if firstNonEmpty(o.backend, a.cfg.Backend) != "local" {
		return false, nil
	}
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return true, &usageError{fmt.Errorf("%s: %q is not a cluster name: %s", what, name, strings.Join(msgs, "; "))}
	}
	for _, f := range []string{"namespace", "port"} {
		if cmd.Flags().Changed(f) {
			return true, &usageError{fmt.Errorf("%s: --%s is for the KubeRay backend: a local cluster listens on this machine already", what, f)}
		}
	}
	return true, nil
}

// shellQuote returns s as one word of a POSIX shell: as it is when it
// holds only characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%,=", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
