package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/runner/kuberay"
)

// uiOptions are ui's flags.
type uiOptions struct {
	addr          string
	namespace     string
	allNamespaces bool
	dagsterURL    string
	tokenFile     string
	proxyHeader   string
}

func (a *app) uiCommand() *cobra.Command {
	var o uiOptions
	cmd := &cobra.Command{
		Use:   "ui [--addr 127.0.0.1:PORT] [--namespace NS | -A] [--dagster-url URL]",
		Short: "Serve a live, read-only web page of raystep's clusters",
		Long: `ui serves a read-only web page of the clusters raystep runs (the records of
raystep ls), updated live from one set of watches, and the same records as
JSON at /api/clusters. It listens on 127.0.0.1 unless --addr says otherwise;
an address other machines can reach needs --auth-token-file (clients send
Authorization: Bearer TOKEN, or open the page once with ?token=TOKEN) or
--auth-proxy-header (a header an authenticating proxy in front sets).`,
		Example: "  raystep ui -A\n  raystep ui -n ml-ads --dagster-url http://localhost:3000",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.ui(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on, HOST:PORT (port 0 picks a free one)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "show every namespace")
	f.StringVar(&o.dagsterURL, "dagster-url", "", "the Dagster UI's URL, to link runs and assets into")
	f.StringVar(&o.tokenFile, "auth-token-file", "", "file holding the token every request must carry")
	f.StringVar(&o.proxyHeader, "auth-proxy-header", "", "header a trusted authenticating proxy sets on every request, e.g. X-Forwarded-User")
	return cmd
}

// check checks ui's flags and returns how requests are authenticated and
// the Dagster URL, before anything connects or listens.
func (o uiOptions) check() (ui.Auth, *url.URL, error) {
	var auth ui.Auth
	auth.ProxyHeader = o.proxyHeader
	if o.tokenFile != "" {
		token, err := ui.ReadToken(o.tokenFile)
		if err != nil {
			return auth, nil, &usageError{fmt.Errorf("ui: %w", err)}
		}
		auth.Token = token
	}
	if err := ui.CheckAddr(o.addr, auth); err != nil {
		return auth, nil, &usageError{fmt.Errorf("ui: %w", err)}
	}
	if o.dagsterURL == "" {
		return auth, nil, nil
	}
	u, err := url.Parse(o.dagsterURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return auth, nil, &usageError{fmt.Errorf("ui: --dagster-url %q: want an http(s) URL such as http://localhost:3000", o.dagsterURL)}
	}
	return auth, u, nil
}

func (a *app) ui(cmd *cobra.Command, o uiOptions) error {
	auth, dagster, err := o.check()
	if err != nil {
		return err
	}
	if o.allNamespaces && o.namespace != "" {
		return &usageError{errors.New("ui: -A and --namespace exclude each other")}
	}
	clients, _, err := a.kube("ui")
	if err != nil {
		return err
	}
	ns := ""
	if !o.allNamespaces {
		profile, err := a.profile(cmd)
		if err != nil {
			return err
		}
		ns = kuberay.ResolveNamespace(kuberay.Namespaces{Flag: o.namespace, Env: a.cfg.Namespace, Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
	}
	ctx := cmd.Context()
	store := &ui.Store{}
	if err := store.Watch(ctx, clients.Ray, ns); err != nil {
		return err
	}
	scope := "every namespace"
	if ns != "" {
		scope = "namespace " + ns
	}
	srv := &ui.Server{Store: store, Auth: auth, Dagster: dagster, Scope: scope}
	return a.serve(ctx, o.addr, srv.Handler())
}

// serve listens on addr, prints the page's URL and serves h until ctx is
// done, then closes open connections (live updates included).
func (a *app) serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("ui: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(a.stdout, "raystep ui: http://%s/\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("ui: serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdown) // live streams end with ctx (BaseContext); Close what is left
	_ = hs.Close()
	return nil
}
