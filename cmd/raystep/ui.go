package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/fleet"
)

// uiOptions are ui's flags.
type uiOptions struct {
	addr          string
	namespace     string
	allNamespaces bool
	dagsterURL    string
	tokenFile     string
	proxyHeader   string
	trusted       []string
	publicURLs    []string
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
--auth-proxy-header (a header an authenticating proxy in front sets) with
--trusted-proxy (the proxy's addresses) or the token too.

It answers only its own host names (loopback ones, the --addr host, and
those of --public-url) and only its own pages: a request naming another
host (DNS rebinding) is refused with 421, one from another site's page
(a cross-origin read, WebSocket or event stream) with 403.

Its History view (/history, and /api/history as JSON) lists the steps
that ended, from this machine's history and the store the profile's
spec.history.url names, with a page per step: its record, phases,
utilization and driver log. A fresh ui with no local state and the
profile shows what every step wrote to that store.`,
		Example: "  raystep ui -A\n  raystep ui -n ml-ads --dagster-url http://localhost:3000",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.ui(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on, HOST:PORT (port 0 picks a free one)")
	namespaceFlag(f, &o.namespace, "n", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "show every namespace")
	f.StringVar(&o.dagsterURL, "dagster-url", "", "the Dagster UI's URL, to link runs and assets into")
	f.StringVar(&o.tokenFile, "auth-token-file", "", "file holding the token every request must carry")
	f.StringVar(&o.proxyHeader, "auth-proxy-header", "", "header a trusted authenticating proxy sets on every request, e.g. X-Forwarded-User")
	f.StringArrayVar(&o.trusted, "trusted-proxy", nil, "address or CIDR range of the authenticating proxy; requests from elsewhere are refused (repeatable)")
	f.StringArrayVar(&o.publicURLs, "public-url", nil, "a URL people open the UI by through a proxy or Ingress, e.g. https://raystep.example.com/ (repeatable)")
	return cmd
}

func (a *app) ui(cmd *cobra.Command, o uiOptions) error {
	auth, dagster, err := ui.Flags{Addr: o.addr, TokenFile: o.tokenFile, ProxyHeader: o.proxyHeader, Trusted: o.trusted,
		PublicURLs: o.publicURLs, DagsterURL: o.dagsterURL}.Check()
	if err != nil {
		return &usageError{fmt.Errorf("ui: %w", err)}
	}
	scope, err := fleetScope("ui", o.namespace, o.allNamespaces)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	store := &ui.Store{}
	kube, err := a.watchKube(cmd, scope, store)
	if err != nil {
		return err
	}
	mine := a.uiLocal(ctx, scope)
	switch err := mine.Sync(store); {
	case errors.Is(err, fleet.ErrNotHere):
	case err != nil:
		return fmt.Errorf("ui: %w", err)
	default:
		go mine.Follow(ctx, store)
		kube.scope = append(kube.scope, "the local heads on this machine")
	}
	pods := &ui.Pods{}
	if kube.clients != nil {
		if err := pods.Watch(ctx, kube.clients.Kube, kube.namespace); err != nil {
			return err
		}
	}
	reach, heads := a.uiHeads(cmd, kube.clients)
	defer heads.Close()
	srv := &ui.Server{Store: store, Auth: auth, Dagster: dagster, Scope: strings.Join(kube.scope, " and "), Reach: reach, Pods: pods}
	if idx, done, err := a.historyIndex(cmd); err == nil {
		defer done()
		srv.History = idx
	}
	defer srv.Close()
	return ui.Serve(ctx, o.addr, srv.Handler(), a.stdout)
}
