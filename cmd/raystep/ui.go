package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
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
(a cross-origin read, WebSocket or event stream) with 403.`,
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
	f.StringArrayVar(&o.trusted, "trusted-proxy", nil, "address or CIDR range of the authenticating proxy; requests from elsewhere are refused (repeatable)")
	f.StringArrayVar(&o.publicURLs, "public-url", nil, "a URL people open the UI by through a proxy or Ingress, e.g. https://raystep.example.com/ (repeatable)")
	return cmd
}

// check checks ui's flags and returns how requests are authenticated and
// the Dagster URL, before anything connects or listens.
func (o uiOptions) check() (ui.Auth, *url.URL, error) {
	var auth ui.Auth
	auth.ProxyHeader = o.proxyHeader
	trusted, err := ui.ParseTrustedProxies(o.trusted)
	if err != nil {
		return auth, nil, &usageError{fmt.Errorf("ui: %w", err)}
	}
	if len(trusted) > 0 && o.proxyHeader == "" {
		return auth, nil, &usageError{errors.New("ui: --trusted-proxy goes with --auth-proxy-header: it names where that header may come from")}
	}
	auth.TrustedProxies = trusted
	if auth.Sites, err = ui.NewSites(o.addr, o.publicURLs); err != nil {
		return auth, nil, &usageError{fmt.Errorf("ui: %w", err)}
	}
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
	ctx := cmd.Context()
	store := &ui.Store{}
	kube, err := a.watchKube(cmd, o, store)
	if err != nil {
		return err
	}
	if o.namespace == "" { // local heads have no namespace, as in ls
		if err := a.syncLocal(store); err != nil {
			return err
		}
		go a.keepLocal(ctx, store)
		kube.scope = append(kube.scope, "the local heads on this machine")
	}
	pods := &ui.Pods{}
	if kube.clients != nil {
		if err := pods.Watch(ctx, kube.clients.Kube, kube.namespace); err != nil {
			return err
		}
	}
	reach, heads := a.uiHeads(kube.clients, kube.config)
	defer heads.Close()
	srv := &ui.Server{Store: store, Auth: auth, Dagster: dagster, Scope: strings.Join(kube.scope, " and "), Reach: reach, Pods: pods}
	defer srv.Close()
	return a.serve(ctx, o.addr, srv.Handler())
}

// uiKube is what the ui watches on Kubernetes: nothing (zero clients)
// when nothing points at Kubernetes.
type uiKube struct {
	scope     []string // what the watches cover, for the page's heading
	clients   *kuberay.Clients
	config    *kubeConfig
	namespace string // "" for every namespace
}

// watchKube starts the store's watches on Kubernetes and says what they
// cover; none when nothing points at Kubernetes (as for ls) and no
// --namespace asks for it.
func (a *app) watchKube(cmd *cobra.Command, o uiOptions, store *ui.Store) (uiKube, error) {
	var kc *kubeConfig
	clients, ns, err := a.kubeFleet(cmd, "ui", &kc).Reach(fleet.Scope{Namespace: o.namespace, All: o.allNamespaces})
	if errors.Is(err, fleet.ErrNotHere) {
		return uiKube{}, nil
	}
	if err != nil {
		return uiKube{}, err
	}
	if err := store.Watch(cmd.Context(), clients.Kube, clients.Ray, ns); err != nil {
		return uiKube{}, fmt.Errorf("ui: %w", err)
	}
	scope := "every namespace"
	if ns != "" {
		scope = "namespace " + ns
	}
	return uiKube{scope: []string{scope}, clients: clients, config: kc, namespace: ns}, nil
}

// localRefresh is how often ui reads the local backend's records again.
const localRefresh = 5 * time.Second

// syncLocal puts the local heads recorded on this machine in the store.
func (a *app) syncLocal(store *ui.Store) error {
	mine, err := a.localFleet()
	if err != nil {
		return fmt.Errorf("ui: read the local heads: %w", err)
	}
	rows, err := mine.List(context.Background(), fleet.Scope{})
	if err != nil {
		return fmt.Errorf("ui: read the local heads and steps: %w", err)
	}
	records := make([]*ui.Record, len(rows))
	for i, r := range rows {
		records[i] = &ui.Record{Record: r}
	}
	store.SetLocal(records)
	return nil
}

// keepLocal reads the local records again whenever a file in their dirs
// changes (inotify), and every localRefresh anyway (a head that died or
// expired changes no file), until ctx is done.
func (a *app) keepLocal(ctx context.Context, store *ui.Store) {
	tick := time.NewTicker(localRefresh)
	defer tick.Stop()
	var changed <-chan fsnotify.Event
	if w, err := a.watchLocal(); err != nil {
		a.log.Warn("ui: local records are read every " + localRefresh.String() + ": " + err.Error())
	} else {
		defer w.Close()
		changed = w.Events
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
		if err := a.syncLocal(store); err != nil {
			a.log.Warn(err.Error())
		}
	}
}

// watchLocal watches the dirs of the local records (made if missing, so a
// first step or cluster is seen at once).
func (a *app) watchLocal() (*fsnotify.Watcher, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, local.StepsDir(dir)} {
		if err = os.MkdirAll(d, 0o700); err == nil {
			err = w.Add(d)
		}
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
	}
	go func() { // errors (an overflow, say) leave the ticker to catch up
		for range w.Errors {
		}
	}()
	return w, nil
}

// serve listens on addr, prints the page's URL and serves h until ctx is
// done, then closes open connections (live updates included).
func (a *app) serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("ui: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(a.stdout, "raystep ui: http://%s/\n", shownAddr(ln.Addr()))
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

// shownAddr is the address the UI's URL names: the listen address, or,
// on every interface (0.0.0.0, ::), this machine's loopback with the port,
// which a browser here can open.
func shownAddr(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
	}
	return addr.String()
}
