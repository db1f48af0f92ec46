package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// Kueue's objects in the cluster.
const (
	// KueueNamespace is where Kueue keeps its webhook certificate Secret.
	KueueNamespace = "kueue-system"
	// KueueAPIVersion is the version of Kueue's API the tests and the
	// sandbox write (the CRDs' storage version).
	KueueAPIVersion = "kueue.x-k8s.io/v1beta2"

	kueueSecret  = "kueue-webhook-server-cert"
	kueueService = "kueue-webhook-service"
)

// kueueConversionCRDs are the CRDs whose conversion webhook Kueue's
// certificate manager fills in with its CA before it starts.
var kueueConversionCRDs = []string{"localqueues", "clusterqueues", "workloads", "cohorts", "multikueueclusters"}

// kueueConfig is Kueue's configuration: RayJobs only, and only those with
// a queue-name label; no leader election; every server on loopback.
//
// Kueue's manager reads its metrics certificate from a fixed path under
// /etc unless it manages its certificates itself, so it does: it writes
// them into the Secret in KueueNamespace, which startKueue copies into
// certDir as a kubelet mounts it into Kueue's pod, and puts its CA into
// the conversion webhooks of its CRDs. No webhook is registered with the
// API server (raystep sets spec.suspend itself), and the CRDs' conversion
// webhooks are never called: every client, Kueue's own included, uses the
// storage version.
const kueueConfig = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %[1]s
manageJobsWithoutQueueName: false
leaderElection:
  leaderElect: false
health:
  healthProbeBindAddress: 127.0.0.1:%[2]d
metrics:
  bindAddress: 127.0.0.1:%[3]d
webhook:
  host: 127.0.0.1
  port: %[4]d
  certDir: %[5]s
internalCertManagement:
  enable: true
  webhookServiceName: %[6]s
  webhookSecretName: %[7]s
integrations:
  frameworks:
  - ray.io/rayjob
featureGates:
  VisibilityOnDemand: false
`

// StartKueue installs Kueue's CRDs, the namespace and Secret its
// certificate manager needs, and starts its manager (from the assets'
// bin/kueue); it returns once the manager is ready (its controllers run).
// Start calls it with Options.Kueue; a test that shares a cluster started
// without may call it once, later. Stop stops the manager.
func (c *Cluster) StartKueue(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.AssetsDir, "bin", "kueue")); err != nil {
		return fmt.Errorf("kueue: %w (build it with %s)", err, buildScript)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	health, metrics, webhook := ports[0], ports[1], ports[2]
	if err := c.installKueueCRDs(webhook); err != nil {
		return err
	}
	if err := c.kueuePrerequisites(ctx); err != nil {
		return err
	}
	certDir := filepath.Join(c.LogDir, "kueue-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fmt.Errorf("create kueue cert dir: %w", err)
	}
	cfgPath := filepath.Join(c.LogDir, "kueue-config.yaml")
	cfg := fmt.Sprintf(kueueConfig, KueueNamespace, health, metrics, webhook, certDir, kueueService, kueueSecret)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("write kueue config: %w", err)
	}
	p, err := startProcess("kueue", c.LogDir, filepath.Join(c.AssetsDir, "bin", "kueue"),
		[]string{"--config=" + cfgPath, "--zap-log-level=2"}, []string{"KUBECONFIG=" + c.KubeConfigPath})
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	if err := c.mountKueueCerts(ctx, p, certDir); err != nil {
		return err
	}
	return waitHealthy(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
}

// mountKueueCerts waits until Kueue has written its certificate into its
// Secret and copies the Secret's keys into dir, the files Kueue waits for.
func (c *Cluster) mountKueueCerts(ctx context.Context, p *process, dir string) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if err := p.exited(); err != nil {
			return err
		}
		s, err := c.Clientset.CoreV1().Secrets(KueueNamespace).Get(ctx, kueueSecret, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get secret %s/%s: %w", KueueNamespace, kueueSecret, err)
		}
		if len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0 {
			for k, v := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
					return fmt.Errorf("write kueue certificate: %w", err)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for kueue's certificate in secret %s/%s: %w", KueueNamespace, kueueSecret, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// installKueueCRDs installs the CRDs from the assets' kueue-crds/, with a
// conversion webhook on loopback where Kueue's certificate manager
// expects one.
func (c *Cluster) installKueueCRDs(webhookPort int) error {
	files, err := filepath.Glob(filepath.Join(c.AssetsDir, "kueue-crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("kueue CRDs: none in %s (build them with %s)", filepath.Join(c.AssetsDir, "kueue-crds"), buildScript)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read kueue CRD: %w", err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if isConversionCRD(crd.Name) {
			url := fmt.Sprintf("https://127.0.0.1:%d/convert", webhookPort)
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
					ConversionReviewVersions: []string{"v1"},
				},
			}
		}
		crds = append(crds, crd)
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{CRDs: crds, MaxTime: startProcessTimeout}); err != nil {
		return fmt.Errorf("install kueue CRDs: %w", err)
	}
	return nil
}

func isConversionCRD(name string) bool {
	for _, n := range kueueConversionCRDs {
		if name == n+".kueue.x-k8s.io" {
			return true
		}
	}
	return false
}

// kueuePrerequisites creates Kueue's namespace and the empty Secret its
// certificate manager fills.
func (c *Cluster) kueuePrerequisites(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", KueueNamespace, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kueueSecret, Namespace: KueueNamespace}}
	if _, err := c.Clientset.CoreV1().Secrets(KueueNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create secret %s/%s: %w", KueueNamespace, kueueSecret, err)
	}
	return nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}
