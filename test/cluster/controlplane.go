package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records every request at Metadata level: who did what to
// which object, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// startProcessTimeout bounds each of envtest's waits: a process to
// answer, the CRDs to be served.
const startProcessTimeout = 3 * time.Minute

// startControlPlane starts etcd and the API server through envtest,
// installs the KubeRay CRDs and writes the admin kubeconfig.
func (c *Cluster) startControlPlane(ctx context.Context, opts Options) error {
	crds, err := crdDir(ctx)
	if err != nil {
		return err
	}
	wrapDir := filepath.Join(c.LogDir, "bin")
	if err := os.MkdirAll(wrapDir, 0o755); err != nil {
		return fmt.Errorf("create wrapper dir: %w", err)
	}
	apiserverBin, err := wrapDeathSignal(wrapDir, filepath.Join(c.AssetsDir, "bin", "kube-apiserver"))
	if err != nil {
		return err
	}
	etcdBin, err := wrapDeathSignal(wrapDir, filepath.Join(c.AssetsDir, "bin", "etcd"))
	if err != nil {
		return err
	}
	apiLog, err := c.createLog("kube-apiserver")
	if err != nil {
		return err
	}
	etcdLog, err := c.createLog("etcd")
	if err != nil {
		return err
	}
	api := &envtest.APIServer{Path: apiserverBin, Out: apiLog, Err: apiLog}
	// The API server reaches a node's kubelet (port-forward, logs, exec) at
	// its InternalIP only, 127.0.0.1 for every kwok node: never by a
	// hostname some resolver would look up. With no kubelet CA given it
	// does not verify kwok's self-signed certificate.
	api.Configure().Set("kubelet-preferred-address-types", "InternalIP")
	if opts.Audit {
		if err := c.configureAudit(api); err != nil {
			return err
		}
	}
	c.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(c.Scheme); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	if err := rayv1.AddToScheme(c.Scheme); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      &envtest.Etcd{Path: etcdBin, Out: etcdLog, Err: etcdLog},
		},
		Scheme:                c.Scheme,
		CRDDirectoryPaths:     []string{crds},
		ErrorIfCRDPathMissing: true,
		// envtest's own bounds (20 s per process, 10 s for the CRDs to
		// be served) are for an idle machine; on a busy 2-core one the
		// API server took 44 s to serve the CRDs. These bound a hang,
		// not the speed: the caller's context bounds the whole start.
		ControlPlaneStartTimeout: startProcessTimeout,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: startProcessTimeout},
	}
	if c.Config, err = c.env.Start(); err != nil {
		c.env.Stop() //nolint:errcheck // the start error says more
		c.env = nil
		return fmt.Errorf("start API server and etcd: %w", err)
	}
	c.KubeConfig = c.env.KubeConfig
	c.KubeConfigPath = filepath.Join(c.LogDir, "kubeconfig")
	if err := os.WriteFile(c.KubeConfigPath, c.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	return nil
}

// createLog creates LogDir/name.log for a process envtest runs; stop closes
// it after the process has exited.
func (c *Cluster) createLog(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(c.LogDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	c.logs = append(c.logs, f)
	return f, nil
}

func (c *Cluster) configureAudit(api *envtest.APIServer) error {
	policy := filepath.Join(c.LogDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return fmt.Errorf("write audit policy: %w", err)
	}
	c.AuditLogPath = filepath.Join(c.LogDir, "audit.jsonl")
	args := api.Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", c.AuditLogPath)
	// Blocking mode writes each event before the response, so a test that
	// reads the log after its requests sees all of them.
	args.Set("audit-log-mode", "blocking")
	args.Set("audit-log-format", "json")
	return nil
}

// checkLoopbackCIDR rejects pod ranges outside 127.0.0.0/8: no traffic may
// ever reach a fake pod IP anywhere but this machine.
func checkLoopbackCIDR(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	if !p.Addr().Is4() || !p.Addr().IsLoopback() || p.Bits() < 8 {
		return fmt.Errorf("pod CIDR %q: must lie inside 127.0.0.0/8", cidr)
	}
	return nil
}
