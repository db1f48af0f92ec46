package kuberay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// ConnectOptions says which Kubernetes cluster to talk to.
type ConnectOptions struct {
	// Kubeconfig is an explicit kubeconfig file (--kubeconfig); empty
	// follows kubectl's rules: KubeconfigEnv, then Home's .kube/config,
	// then the in-cluster service account (rest.InClusterConfig: the
	// token, CA and namespace under /var/run/secrets/kubernetes.io/
	// serviceaccount, the API server at KUBERNETES_SERVICE_HOST:PORT).
	Kubeconfig string
	// KubeconfigEnv is $KUBECONFIG: kubeconfig files separated by the OS's
	// path list separator.
	KubeconfigEnv string
	// Home is the home directory ($HOME).
	Home string
	// Context is the kubeconfig context; empty means the current one.
	Context string
	// UserAgent identifies raystep to the API server, e.g. "raystep/v0.3.0".
	UserAgent string
	// Warn receives each distinct warning the API server sends (deprecated
	// fields, policy warnings); nil drops them.
	Warn func(msg string)
	// Wrap, if set, wraps the HTTP transport (tests count requests with it).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Clients are the clients the backend, `raystep ls` and `raystep gc` use.
type Clients struct {
	// Config is the REST config they were built from.
	Config *rest.Config
	Kube   kubeapi.Interface
	Ray    kubeapi.RayInterface
	// Namespace is the kubeconfig context's namespace ("default" when it
	// sets none, or the pod's namespace in a cluster).
	Namespace string
	// InCluster says Config is the pod's service account (no kubeconfig
	// named a cluster, KUBERNETES_SERVICE_HOST and PORT are set and the
	// token is mounted): raystep runs in the cluster it talks to, where the
	// head service's DNS name resolves.
	InCluster bool
}

// ErrNoKubeconfig is returned by Connect when no kubeconfig names a
// cluster and raystep does not run in a pod.
var ErrNoKubeconfig = errors.New("no kubeconfig found")

// Connect loads the kubeconfig as kubectl does and builds the clients.
func Connect(o ConnectOptions) (*Clients, error) {
	cc := o.clientConfig()
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, ErrNoKubeconfig // client-go's words point at KUBERNETES_MASTER, which kubectl users never set
	}
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig namespace: %w", err)
	}
	// client-go falls back to the service account only when the
	// kubeconfig files hold nothing.
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	c, err := NewClients(cfg, o)
	if err != nil {
		return nil, err
	}
	c.Namespace, c.InCluster = ns, clientcmdapi.IsConfigEmpty(&raw)
	return c, nil
}

// clientConfig is the kubeconfig as kubectl would load it for o; nothing
// is read yet.
func (o ConnectOptions) clientConfig() clientcmd.ClientConfig {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig, Precedence: filepath.SplitList(o.KubeconfigEnv)}
	if len(rules.Precedence) == 0 && o.Home != "" {
		rules.Precedence = []string{filepath.Join(o.Home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
}

// KubeconfigNamespace is the namespace of o's kubeconfig context (or of
// the pod's service account), read from the files alone, as a command
// that never talks to the API server (render) needs it; "" without any
// kubeconfig. A kubeconfig that cannot be read, or a context it does not
// hold, is the error Connect would give.
func KubeconfigNamespace(o ConnectOptions) (string, error) {
	cc := o.clientConfig()
	_, err := cc.ClientConfig() // checks the context as Connect does
	switch {
	case clientcmd.IsEmptyConfig(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return "", fmt.Errorf("load kubeconfig namespace: %w", err)
	}
	return ns, nil
}

// NewClients builds the clients from a REST config (tests pass the test
// cluster's). The config is copied; o.UserAgent, o.Warn and o.Wrap apply.
func NewClients(cfg *rest.Config, o ConnectOptions) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	if o.Warn != nil {
		cfg.WarningHandlerWithContext = &warnOnce{warn: o.Warn, seen: map[string]bool{}}
	}
	if o.Wrap != nil {
		cfg.Wrap(o.Wrap)
	}
	cs, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build Kubernetes client: %w", err)
	}
	return &Clients{Config: cfg, Kube: cs, Ray: cs, Namespace: "default"}, nil
}

// warnOnce passes each distinct API server warning on once: to the
// running step's events once a step provisions on these clients (so that
// a Pod Security warning on its RayJob reaches the console and Dagster
// like every other warning), to warn before that (ls, gc).
type warnOnce struct {
	warn   func(string)
	mu     sync.Mutex
	seen   map[string]bool
	events runner.Sink
}

// tell sends the warnings from now on to events.
func (w *warnOnce) tell(events runner.Sink) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = events
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *warnOnce) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, msg string) {
	if code != 299 || msg == "" {
		return
	}
	w.mu.Lock()
	first, events := !w.seen[msg], w.events
	w.seen[msg] = true
	w.mu.Unlock()
	switch {
	case !first:
	case events != nil:
		events.Event(runner.Event{Kind: runner.KindWarning, Message: "API server: " + msg})
	default:
		w.warn("API server: " + msg)
	}
}

// Namespaces are the places a namespace may come from, in the order
// ResolveNamespace weighs them; empty ones do not count.
type Namespaces struct {
	// Flag is --namespace.
	Flag string
	// Env is $RAYSTEP_NAMESPACE.
	Env string
	// Spec is the spec's metadata.namespace; empty where a command reads no
	// spec (ls, gc).
	Spec string
	// Profile is the platform profile's namespace (Profile.Namespace: ""
	// for the built-in profile).
	Profile string
	// Kubeconfig is the kubeconfig context's namespace (Clients.Namespace,
	// or KubeconfigNamespace where a command does not connect: render).
	Kubeconfig string
}

// ResolveNamespace picks the namespace of raystep's clusters: the first of
// the flag, $RAYSTEP_NAMESPACE, the spec's, the profile's and the
// kubeconfig's that is set, else "default". It is the one precedence every
// command that places or looks up a RayJob uses. The built-in profile
// names no namespace here (schemas.Profile.Namespace), so without a
// profile the kubeconfig context's comes before default.
func ResolveNamespace(n Namespaces) string {
	for _, ns := range []string{n.Flag, n.Env, n.Spec, n.Profile, n.Kubeconfig} {
		if ns != "" {
			return ns
		}
	}
	return "default"
}

// KubeContext is a context of a kubeconfig: its name, cluster and
// namespace, and whether it is the current one.
type KubeContext struct {
	Name, Cluster, Namespace string
	Current                  bool
}

// KubeContexts lists the contexts of o's kubeconfig, as kubectl merges
// it, by name, reading the files alone; none without a kubeconfig.
func KubeContexts(o ConnectOptions) ([]KubeContext, error) {
	raw, err := o.clientConfig().RawConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	out := make([]KubeContext, 0, len(raw.Contexts))
	for name, c := range raw.Contexts {
		out = append(out, KubeContext{Name: name, Cluster: c.Cluster, Namespace: c.Namespace, Current: name == raw.CurrentContext})
	}
	slices.SortFunc(out, func(a, b KubeContext) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
