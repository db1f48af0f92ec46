package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	ray "github.com/ray-project/kuberay/ray-operator/controllers/ray"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/dashboardclient"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// errNoDashboard is what every dashboard call returns when the cluster was
// started without Options.DashboardURL.
var errNoDashboard = errors.New("no Ray dashboard configured for this test cluster (cluster.Options.DashboardURL)")

// operator is the KubeRay RayCluster and RayJob reconcilers running in a
// controller-runtime manager in this process.
type operator struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
	log    *os.File
	detach func() // stops the global log going to log
}

// startOperator starts the reconcilers as KubeRay's own main does (same
// cache selectors, one worker each) and waits for the caches to sync.
func startOperator(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, logDir, dashboardURL string) (*operator, error) {
	logFile, err := os.Create(filepath.Join(logDir, "kuberay-operator.log"))
	if err != nil {
		return nil, fmt.Errorf("create operator log: %w", err)
	}
	jobSelector := labels.SelectorFromSet(labels.Set{utils.KubernetesCreatedByLabelKey: utils.ComponentName})
	mgr, err := ctrl.NewManager(rest.CopyConfig(cfg), ctrl.Options{
		Scheme:  scheme,
		Logger:  crzap.New(crzap.WriteTo(logFile), crzap.UseDevMode(true)),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: map[client.Object]cache.ByObject{&batchv1.Job{}: {Label: jobSelector}}},
		// Several clusters may run in one test binary, each with its own
		// manager registering the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("create operator manager: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan struct{}), log: logFile, detach: attachGlobalLog(logFile)}
	if err := ray.NewReconciler(runCtx, mgr, ray.RayClusterReconcilerOptions{}).SetupWithManager(mgr, 1); err != nil {
		op.release()
		return nil, fmt.Errorf("set up RayCluster reconciler: %w", err)
	}
	provider := dashboardProvider{}
	if u, err := url.Parse(dashboardURL); err == nil {
		provider.hostPort, provider.host = u.Host, u.Hostname()
	}
	if err := ray.NewRayJobReconciler(runCtx, mgr, ray.RayJobReconcilerOptions{}, provider).SetupWithManager(mgr, 1); err != nil {
		op.release()
		return nil, fmt.Errorf("set up RayJob reconciler: %w", err)
	}
	go func() {
		op.err = mgr.Start(runCtx)
		close(op.done)
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.Join(fmt.Errorf("operator caches did not sync: %w", context.Cause(ctx)), op.stop(context.WithoutCancel(ctx)))
	}
	return op, nil
}

// release frees what a manager that never started holds.
func (o *operator) release() {
	o.cancel()
	o.detach()
	o.log.Close()
}

// stop cancels the manager and waits until it has returned, or ctx ends.
func (o *operator) stop(ctx context.Context) error {
	o.cancel()
	defer func() {
		o.detach()
		o.log.Close()
	}()
	select {
	case <-o.done:
		if o.err != nil {
			return fmt.Errorf("operator: %w", o.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop operator: %w", context.Cause(ctx))
	}
}

// DashboardLabel, on a RayJob (KubeRay copies its labels to the
// RayCluster), sends the operator's dashboard calls for that cluster to
// another local Ray head than Options.DashboardURL: its value is
// DashboardLabelValue of that head's dashboard URL.
const DashboardLabel = "test.raystep.dev/dashboard"

// DashboardLabelValue returns the DashboardLabel value that routes to the
// dashboard at url (http://127.x.y.z:port): "127.x.y.z_port", as a label
// value cannot hold a colon.
func DashboardLabelValue(url string) (string, error) {
	host, port, err := loopbackHostPort(url)
	if err != nil {
		return "", err
	}
	return host + "_" + port, nil
}

// loopbackHostPort splits an http URL of a loopback address.
func loopbackHostPort(raw string) (host, port string, err error) {
	u, err := url.Parse(raw)
	if err == nil && u.Scheme == "http" {
		host, port, err = net.SplitHostPort(u.Host)
	}
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return "", "", fmt.Errorf("dashboard URL %q: want http://127.x.y.z:port", raw)
	}
	return host, port, nil
}

// dashboardProvider gives the RayJob reconciler dashboard clients that talk
// to one real local Ray head, or to the one a RayCluster's DashboardLabel
// names.
type dashboardProvider struct {
	hostPort string // the head's dashboard, host:port, or "" for none
	host     string
}

var _ utils.ClientProvider = dashboardProvider{}

// GetDashboardClient returns KubeRay's own dashboard client constructor
// (auth token lookup from the cluster's Secret, async job info cache and
// all) with the head service's address replaced by the configured head.
func (p dashboardProvider) GetDashboardClient(ctx context.Context, mgr manager.Manager) func(*rayv1.RayCluster, string) (dashboardclient.RayDashboardClientInterface, error) {
	kuberay := utils.GetRayDashboardClientFunc(ctx, mgr, false)
	return func(rc *rayv1.RayCluster, _ string) (dashboardclient.RayDashboardClientInterface, error) {
		hostPort := p.hostPort
		if v := rc.Labels[DashboardLabel]; v != "" {
			host, port, _ := strings.Cut(v, "_")
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return nil, fmt.Errorf("RayCluster %s/%s: label %s=%q: want a loopback host_port", rc.Namespace, rc.Name, DashboardLabel, v)
			}
			hostPort = net.JoinHostPort(host, port)
		}
		if hostPort == "" {
			c := &dashboardclient.RayDashboardClient{}
			c.InitClient(&http.Client{Transport: failingTransport{}}, "http://ray-dashboard.invalid", "")
			return c, nil
		}
		return kuberay(rc, hostPort)
	}
}

// GetHttpProxyClient serves RayService only, which these clusters do not
// run; it points at the configured head's host all the same, never at a
// pod IP.
func (p dashboardProvider) GetHttpProxyClient(mgr manager.Manager) func(string, string, string, int) utils.RayHttpProxyClientInterface {
	kuberay := utils.GetRayHttpProxyClientFunc(mgr, false)
	host := p.host
	if host == "" {
		host = "127.0.0.1"
	}
	return func(_, ns, pod string, port int) utils.RayHttpProxyClientInterface {
		return kuberay(host, ns, pod, port)
	}
}

// failingTransport fails every request as an unreachable dashboard would.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errNoDashboard
}
