package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/schemas"
)

// This file is the one place raystep's commands meet its backends: app is
// a factory of them, and tests replace what it makes (app.newSite,
// app.newFleets) with fakes.

// site is one backend as the commands that keep clusters and run steps
// see it: local.Site (this machine) or kuberay.Site (a namespace).
type site interface {
	fleet.Keeper
	placer
}

// placer places a step: it builds the runner.Backend the step runs on and
// returns the step resolved for it, once: a cluster of its own, a
// borrowed interactive one (p.Cluster), or its Dagster run's.
type placer interface {
	Place(ctx context.Context, step runner.Step, p fleet.Placement) (runner.Step, runner.Backend, error)
}

// addBackendFlag adds --backend, which site reads.
func addBackendFlag(cmd *cobra.Command) {
	cmd.Flags().String("backend", "", "local or kuberay (default $RAYSTEP_BACKEND, else local)")
}

// flagValue is the value of cmd's flag name; "" when cmd has no such flag.
func flagValue(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// backend names the backend a command talks to: --backend, else
// RAYSTEP_BACKEND (local unless it says otherwise).
func (a *app) backend(cmd *cobra.Command) string {
	if b := flagValue(cmd, "backend"); b != "" {
		return b
	}
	return a.cfg.Backend
}

// site is the backend cmd talks to, for the command called what (which
// errors about reaching Kubernetes name).
func (a *app) site(cmd *cobra.Command, what string) (site, error) {
	if a.newSite != nil {
		return a.newSite(cmd, what)
	}
	switch b := a.backend(cmd); b {
	case "local":
		return a.localSite(cmd), nil
	case "kuberay":
		return a.kubeSite(cmd, what), nil
	default:
		return nil, &usageError{fmt.Errorf("--backend %q: want local or kuberay", b)}
	}
}

func (a *app) streams() fleet.Streams { return fleet.Streams{Out: a.stdout, Err: a.stderr} }

func (a *app) userAgent() string { return "raystep/" + a.version }

// localSite is this machine's private heads.
func (a *app) localSite(cmd *cobra.Command) *local.Site {
	return &local.Site{
		Open: a.localClusters, StateDir: a.localStateDir, RayBin: a.rayBin, Given: cmd.Flags().Changed,
		Address: a.cfg.RayAddress, DashboardURL: firstNonEmpty(a.cfg.DashboardURL, a.cfg.RayAPIServerAddress),
		Tokens: local.TokenSources{Raystep: a.cfg.DashboardToken, Env: a.cfg.RayAuthToken, Path: a.cfg.RayAuthTokenPath, Home: a.cfg.Home},
		Logger: a.localLog(), UserAgent: a.userAgent(), Streams: a.streams(), LookupEnv: a.lookup.Lookup,
	}
}

// kubeSite is the namespace of the Kubernetes cluster the flags and
// environment name, for the command called what.
func (a *app) kubeSite(cmd *cobra.Command, what string) *kuberay.Site {
	kc := a.cfg.Kube
	return &kuberay.Site{
		Connect:            func() (*kuberay.Clients, error) { return a.kube(what) },
		Profile:            func() (*schemas.Profile, error) { return a.profile(cmd) },
		Namespace:          flagValue(cmd, "namespace"),
		EnvNamespace:       a.cfg.Namespace,
		DashboardOptions:   a.dashboardOptions(),
		UnschedulableGrace: kc.UnschedulableGrace, HeartbeatInterval: kc.HeartbeatInterval, PortForwardGiveUp: kc.PortForwardGiveUp,
		KeepDir: a.keepDir(), UserAgent: a.userAgent(), Streams: a.streams(),
	}
}

// dashboardOptions is how raystep reaches the dashboards of KubeRay
// clusters: the platform's URL, token, CA and headers, and whether the
// head service's DNS name may be used in a pod.
func (a *app) dashboardOptions() kuberay.DashboardOptions {
	kc := a.cfg.Kube
	headers := http.Header{}
	for k, v := range kc.DashboardHeaders {
		headers.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return kuberay.DashboardOptions{URL: a.cfg.DashboardURL, Token: a.cfg.DashboardToken, CAFile: kc.DashboardCAFile,
		Headers: headers, InCluster: kc.InCluster}
}

// fleets are the backends' clusters as ls, gc, ui and down
// --dagster-run-id ask them, in the order they list them: Kubernetes's,
// then this machine's; each decides whether it applies. Tests replace it
// (app.newFleets).
func (a *app) fleets(cmd *cobra.Command, name string) ([]fleet.Fleet, error) {
	if a.newFleets != nil {
		return a.newFleets(cmd, name)
	}
	mine, err := a.localFleet()
	if err != nil {
		return nil, err
	}
	return []fleet.Fleet{a.kubeFleet(cmd, name), mine}, nil
}

// kubeFleet is raystep's clusters on Kubernetes, for the command name.
func (a *app) kubeFleet(cmd *cobra.Command, name string) *kuberay.Fleet {
	return &kuberay.Fleet{
		Connect:  func() (*kuberay.Clients, error) { return a.kube(name) },
		Required: a.backend(cmd) == "kuberay",
		Namespace: func(kubeconfig string) (string, error) {
			profile, err := a.profile(cmd)
			if err != nil {
				return "", err
			}
			return kuberay.ResolveNamespace(kuberay.Namespaces{Env: a.cfg.Namespace, Profile: profile.Namespace(), Kubeconfig: kubeconfig}), nil
		},
		Warn:      func(msg string) { fmt.Fprintf(a.stderr, "%s: %s\n", name, msg) },
		Notify:    a.notices(),
		Dashboard: a.dashboardOptions(), UserAgent: a.userAgent(), KeepDir: a.keepDir(),
	}
}

// notices prints what KubeRay's watches report on stderr, one line each.
func (a *app) notices() kuberay.Notify { return kuberay.Lines(a.stderr) }

// localFleet is this machine's private heads: none recorded when there is
// no state dir, where no up or step can have recorded one.
func (a *app) localFleet() (*local.Fleet, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return &local.Fleet{}, nil
	}
	f := &local.Fleet{StepsDir: local.StepsDir(dir)}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if f.Clusters, err = a.localClusters(); err != nil {
		return nil, err
	}
	return f, nil
}

// localLog is the local backend's logger: the heads' starts and stops
// are phases and lines raystep shows already, unless debugging.
func (a *app) localLog() *zap.Logger {
	log := a.log.Named("local")
	if a.cfg.LogLevel != "debug" {
		log = log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	return log
}

// localClusters returns the local backend's interactive clusters, in the
// state dir of $XDG_STATE_HOME or $HOME, started with raystep's ray.
func (a *app) localClusters() (*local.Clusters, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return nil, err
	}
	bin, err := a.rayBin()
	if err != nil {
		return nil, err
	}
	return &local.Clusters{Dir: dir, Head: rayhead.Options{RayBin: bin, Logger: a.localLog()}}, nil
}

// localStateDir is where local interactive clusters are recorded.
func (a *app) localStateDir() (string, error) {
	return local.StateDir(func(k string) string {
		switch k {
		case "XDG_STATE_HOME":
			return a.cfg.StateHome
		case "HOME":
			return a.cfg.Home
		}
		return ""
	})
}

// keepDir is where this machine keeps the tokens of the KubeRay clusters
// up made (kuberay.Interactive.KeepDir): beside the local clusters'
// records; "" (keep none) when there is no state dir.
func (a *app) keepDir() string {
	dir, err := a.localStateDir()
	if err != nil {
		return ""
	}
	return filepath.Join(filepath.Dir(dir), "kuberay")
}

// rayBin is RAYSTEP_RAY_BIN, looked up on PATH when it is a bare name;
// empty lets rayhead find ray.
func (a *app) rayBin() (string, error) {
	bin := a.cfg.RayBin
	if bin != "" && !strings.Contains(bin, "/") {
		found, err := exec.LookPath(bin)
		if err != nil {
			return "", &usageError{fmt.Errorf("RAYSTEP_RAY_BIN=%s: %w", bin, errors.Join(err, rayhead.ErrRayNotFound))}
		}
		bin = found
	}
	return bin, nil
}

// kubeConfig is the part of config that the KubeRay backend, ls and gc
// read: how to reach the API server and the dashboards of the clusters
// raystep creates.
type kubeConfig struct {
	// Context is the kubeconfig context; --context overrides it.
	Context string `env:"RAYSTEP_KUBE_CONTEXT"`
	// InCluster=false makes raystep port-forward even inside a pod, where
	// it otherwise reaches dashboards by the head service's cluster DNS
	// name (when it talks to the API server as the pod's service account).
	InCluster bool `env:"RAYSTEP_DASHBOARD_IN_CLUSTER, default=true"`
	// PortForwardGiveUp is how long a broken dashboard port-forward is
	// opened again before the step fails (exit 3).
	PortForwardGiveUp time.Duration `env:"RAYSTEP_PORT_FORWARD_GIVE_UP, default=2m"`
	// DashboardCAFile verifies the dashboard's TLS certificate.
	DashboardCAFile string `env:"RAYSTEP_DASHBOARD_CA_FILE"`
	// DashboardHeaders are "Name:value" pairs separated by commas, sent
	// with every dashboard request (e.g. for an authenticating proxy).
	DashboardHeaders map[string]string `env:"RAYSTEP_DASHBOARD_HEADERS"`
	// Kubeconfig is $KUBECONFIG and Home $HOME, read here so that the
	// kubeconfig is found as kubectl finds it.
	Kubeconfig string `env:"KUBECONFIG"`
	Home       string `env:"HOME"`
	// UnschedulableGrace lets pods stay Unschedulable that long (a cluster
	// autoscaler adding nodes) before the step fails.
	UnschedulableGrace time.Duration `env:"RAYSTEP_UNSCHEDULABLE_GRACE, default=0s"`
	// HeartbeatInterval is how often a step renews its heartbeat Lease.
	HeartbeatInterval time.Duration `env:"RAYSTEP_HEARTBEAT_INTERVAL, default=15s"`
}

// kubeFlags are the flags that choose the Kubernetes cluster.
type kubeFlags struct{ kubeconfig, context string }

// addKubeFlags adds --kubeconfig and --context, shared by every command.
func (a *app) addKubeFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&a.kubeFlags.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or the in-cluster service account)")
	f.StringVar(&a.kubeFlags.context, "context", "", "kubeconfig context (default $RAYSTEP_KUBE_CONTEXT, else the current one)")
}

// kube builds the clients of the cluster the flags and environment name
// for the command called what; nothing is sent to the API server yet.
func (a *app) kube(what string) (*kuberay.Clients, error) {
	clients, err := kuberay.Connect(a.connectOptions())
	if errors.Is(err, kuberay.ErrNoKubeconfig) {
		err = fmt.Errorf("%s looks at Kubernetes: %w: pass --kubeconfig FILE, set KUBECONFIG, "+
			"or start a local cluster with `make sandbox`", what, err)
	}
	return clients, err // exit 3, as every failure to reach the cluster
}

// connectOptions say which kubeconfig and context the flags and
// environment choose, as kubectl finds them.
func (a *app) connectOptions() kuberay.ConnectOptions {
	kc := a.cfg.Kube
	if a.kubeFlags.context != "" {
		kc.Context = a.kubeFlags.context
	}
	return kuberay.ConnectOptions{
		Kubeconfig: a.kubeFlags.kubeconfig, KubeconfigEnv: kc.Kubeconfig, Home: kc.Home, Context: kc.Context,
		UserAgent: a.userAgent(), Warn: func(msg string) { a.log.Warn(msg) },
	}
}

// uiKube is what the ui watches on Kubernetes: nothing (zero clients)
// when nothing points at Kubernetes.
type uiKube struct {
	scope     []string // what the watches cover, for the page's heading
	clients   *kuberay.Clients
	namespace string // "" for every namespace
}

// watchKube starts the store's watches on Kubernetes and says what they
// cover; none when the Kubernetes fleet is not here (as for ls).
func (a *app) watchKube(cmd *cobra.Command, scope fleet.Scope, store *ui.Store) (uiKube, error) {
	clients, ns, err := a.kubeFleet(cmd, "ui").Reach(scope)
	if errors.Is(err, fleet.ErrNotHere) {
		return uiKube{}, nil
	}
	if err != nil {
		return uiKube{}, err
	}
	if err := store.Watch(cmd.Context(), clients.Kube, clients.Ray, ns); err != nil {
		return uiKube{}, fmt.Errorf("ui: %w", err)
	}
	desc := "every namespace"
	if ns != "" {
		desc = "namespace " + ns
	}
	return uiKube{scope: []string{desc}, clients: clients, namespace: ns}, nil
}

// uiLocal is this machine's heads and steps in scope, as the page
// follows them. The fleet is made again at each read: a state dir that
// did not exist at the start (no up yet) has clusters later.
func (a *app) uiLocal(ctx context.Context, scope fleet.Scope) *ui.Local {
	l := &ui.Local{Warn: func(msg string) { a.log.Warn(msg) }, List: func() ([]fleet.Record, error) {
		mine, err := a.localFleet()
		if err != nil {
			return nil, fmt.Errorf("read the local heads: %w", err)
		}
		return mine.List(ctx, scope)
	}}
	if dir, err := a.localStateDir(); err == nil {
		l.Dirs = []string{dir, local.StepsDir(dir)}
	}
	return l
}

// uiHeads is how raystep ui reaches the dashboards of the clusters it
// shows: a local head by its record on this machine, a KubeRay cluster
// as a step would (cluster DNS in a pod, else a port-forward kept by
// heads) with the platform's dashboard headers. Without clients (nothing
// points at Kubernetes) only local heads are reached.
func (a *app) uiHeads(cmd *cobra.Command, clients *kuberay.Clients) (ui.Reach, *ui.KubeHeads) {
	opts := a.dashboardOptions()
	heads := &ui.KubeHeads{}
	if clients != nil {
		heads.Interactive = &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Notify: a.notices()}
		heads.Config, heads.InCluster = clients.Config, clients.InCluster && opts.InCluster
	}
	mine := a.localSite(cmd)
	mine.Given = nil // ui's flags are not the ones a local cluster refuses
	return func(ctx context.Context, r *ui.Record) (ui.Head, error) {
		if r.Backend != fleet.BackendLocal {
			if heads.Interactive == nil {
				return ui.Head{}, fmt.Errorf("%s %s/%s: no Kubernetes to reach it through: %w", r.ClusterKind, r.Namespace, r.Name, ui.ErrNoDashboard)
			}
			h, err := heads.Reach(ctx, r)
			h.Headers = opts.Headers
			return h, err
		}
		url, token, err := mine.Head(r.Record)
		if errors.Is(err, fleet.ErrNotFound) || errors.Is(err, fleet.ErrUsage) {
			err = fmt.Errorf("%w: %w", ui.ErrNoDashboard, err)
		}
		return ui.Head{URL: url, Token: token}, err
	}, heads
}
