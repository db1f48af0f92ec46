package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

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

// addKubeFlags adds --kubeconfig and --context, shared by run, ls and gc.
func (a *app) addKubeFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&a.kubeFlags.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or the in-cluster service account)")
	f.StringVar(&a.kubeFlags.context, "context", "", "kubeconfig context (default $RAYSTEP_KUBE_CONTEXT, else the current one)")
}

// kube builds the clients of the cluster the flags and environment name
// for the command called what; nothing is sent to the API server yet.
func (a *app) kube(what string) (*kuberay.Clients, *kubeConfig, error) {
	kc := a.cfg.Kube
	if a.kubeFlags.context != "" {
		kc.Context = a.kubeFlags.context
	}
	clients, err := kuberay.Connect(kuberay.ConnectOptions{
		Kubeconfig: a.kubeFlags.kubeconfig, KubeconfigEnv: kc.Kubeconfig, Home: kc.Home, Context: kc.Context,
		UserAgent: "raystep/" + version, Warn: func(msg string) { a.log.Warn(msg) },
	})
	if errors.Is(err, kuberay.ErrNoKubeconfig) {
		err = fmt.Errorf("%s looks at Kubernetes: %w: pass --kubeconfig FILE, set KUBECONFIG, "+
			"or start a local cluster with `make sandbox`", what, err)
	}
	if err != nil {
		return nil, nil, err // exit 3, as every failure to reach the cluster
	}
	return clients, &kc, nil
}

// kuberayBackend builds the KubeRay backend on clients for one spec's
// cluster; the step's name and namespace come from the resolved step at
// Provision, and what the cluster reports reaches the user as the step's
// events.
func (a *app) kuberayBackend(clients *kuberay.Clients, kc *kubeConfig, spec *schemas.Spec, profile *schemas.Profile) runner.Backend {
	headers := http.Header{}
	for k, v := range kc.DashboardHeaders {
		headers.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return &kuberay.Backend{
		Kube: clients.Kube, Ray: clients.Ray, Config: clients.Config,
		Spec: spec, Profile: profile,
		Dashboard: kuberay.DashboardOptions{
			URL: a.cfg.DashboardURL, Token: a.cfg.DashboardToken, CAFile: kc.DashboardCAFile, Headers: headers,
			InCluster: clients.InCluster && kc.InCluster,
		},
		UnschedulableGrace: kc.UnschedulableGrace,
		HeartbeatInterval:  kc.HeartbeatInterval,
		PortForwardGiveUp:  kc.PortForwardGiveUp,
	}
}
