// Package cluster runs a real, throw-away Kubernetes control plane with the
// real KubeRay operator for raystep's kuberay tests and `make sandbox`.
//
// Start brings up, on loopback only:
//
//   - etcd and kube-apiserver, through controller-runtime's envtest;
//   - the KubeRay CRDs of the ray-operator module linked into this binary;
//   - kube-controller-manager with only the garbage collector and node
//     lifecycle controllers (deleting a RayJob removes its RayCluster and
//     pods; fake nodes lose their not-ready taint);
//   - the real kube-scheduler (GPU requests, selectors and tolerations are
//     honoured, or the pod is really Unschedulable);
//   - kwok as the kubelet of fake nodes described by NodeSpec, with pod IPs
//     in 127.0.0.0/8, serving the kubelet API (port-forward, logs) on a free
//     loopback port that the API server reaches at each node's InternalIP
//     127.0.0.1, and forwarding every pod's port 8265 to
//     Options.DashboardURL;
//   - the real KubeRay RayCluster and RayJob reconcilers in this process,
//     whose dashboard client talks to Options.DashboardURL (a real local Ray
//     head) instead of the head service's cluster DNS name;
//   - with Options.Kueue, Kueue's manager (bin/kueue) and its CRDs,
//     managing RayJobs that carry a kueue.x-k8s.io/queue-name label.
//
// The binaries come from test/k8s/build.sh. Every process runs in its own
// process group, logs to a file in Cluster.LogDir, and is stopped by Stop,
// or by the test's cleanup with New. This package owns the environment only;
// what tests do in it belongs to them.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// NodeSpec describes one fake node that kwok runs. Its JSON form is what
// the sandbox's -nodes file holds.
type NodeSpec struct {
	// Name is the node name; it is also its kubernetes.io/hostname label.
	Name string `json:"name"`
	// Labels are added to the standard node labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are set on the node, e.g. nvidia.com/gpu=present:NoSchedule.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Capacity is the node's capacity and allocatable: cpu, memory, pods and
	// any extended resource such as nvidia.com/gpu.
	Capacity corev1.ResourceList `json:"capacity"`
}

// Options configures Start. The zero value starts a cluster without nodes
// whose operator cannot reach any Ray dashboard.
type Options struct {
	// AssetsDir is the directory test/k8s/build.sh prints. Empty runs that
	// script, found above the working directory; it builds only once per
	// machine.
	AssetsDir string
	// LogDir receives one log file per component. Empty creates a temporary
	// directory that Stop removes unless KeepLogs is set.
	LogDir string
	// KeepLogs keeps a temporary LogDir after Stop.
	KeepLogs bool
	// Nodes are created before Start returns, and are Ready and schedulable.
	Nodes []NodeSpec
	// DashboardURL is the Ray dashboard the operator's dashboard client uses
	// for every RayCluster, e.g. http://127.0.0.1:8265. Empty makes every
	// dashboard call fail as if the head were unreachable.
	DashboardURL string
	// LoopbackPorts are pod ports kwok sends to the same port of
	// 127.0.0.1: a server a test runs on the real Ray head, such as the
	// notebook of `raystep up --notebook`, bound to its loopback.
	LoopbackPorts []int
	// Audit makes the API server write an audit log of every request, at
	// Metadata level, to Cluster.AuditLogPath.
	Audit bool
	// KwokStages are the stage sets kwok loads; nil means DefaultStages().
	KwokStages []string
	// Logf, when set, receives one line per start phase with its duration.
	Logf func(format string, args ...any)
	// PodCIDR is the range kwok gives pod IPs from; it must lie in
	// 127.0.0.0/8. Empty means 127.1.0.0/16.
	PodCIDR string
	// Kueue starts Kueue's manager with its CRDs (see KueueAPIVersion). Its
	// queues (ResourceFlavors, ClusterQueues, LocalQueues) are the
	// caller's to create: see ProfileQueues.
	Kueue bool
}

// Cluster is a running environment. Its fields are read-only.
type Cluster struct {
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file's bytes.
	KubeConfig []byte
	// KubeConfigPath is a file holding KubeConfig.
	KubeConfigPath string
	// Client is a controller-runtime client whose scheme knows the core
	// Kubernetes kinds and ray.io/v1.
	Client client.Client
	// Clientset is a client-go clientset for the core Kubernetes kinds.
	Clientset kubernetes.Interface
	// Scheme is the scheme of Client and of the operator.
	Scheme *runtime.Scheme
	// LogDir holds one log file per component.
	LogDir string
	// AuditLogPath is the API server's audit log, or "" without Options.Audit.
	AuditLogPath string
	// AssetsDir is the directory the binaries came from.
	AssetsDir string

	env      *envtest.Environment
	procs    []*process // started in order, stopped in reverse
	logs     []*os.File // envtest's process logs
	operator *operator
	kubelet  *kubeletRelay // in front of kwok's kubelet server
	tmpLog   bool          // LogDir was created by Start
	keepLogs bool
}

// Start starts the whole environment and returns once the nodes are Ready
// and schedulable, the scheduler and controller manager report healthy and
// the operator's caches are synced. On error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{keepLogs: opts.KeepLogs}
	countStart("control-plane")
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			err = errors.Join(err, c.stop(stopCtx, true))
		}
	}()
	if c.LogDir = opts.LogDir; c.LogDir == "" {
		if c.LogDir, err = os.MkdirTemp("", "raystep-cluster-"); err != nil {
			return nil, fmt.Errorf("create log dir: %w", err)
		}
		c.tmpLog = true
	} else if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	phases := []struct {
		name string
		run  func() error
	}{
		{"assets", func() (err error) { c.AssetsDir, err = resolveAssets(ctx, opts.AssetsDir, opts.Kueue); return err }},
		{"etcd, kube-apiserver and CRDs", func() error { return c.startControlPlane(ctx, opts) }},
		{"controller manager, scheduler and kwok", func() error { return c.startComponents(ctx, opts) }},
		{fmt.Sprintf("%d nodes Ready", len(opts.Nodes)), func() error { return c.createNodes(ctx, opts.Nodes) }},
		{"KubeRay operator", func() (err error) {
			c.operator, err = startOperator(ctx, c.Config, c.Scheme, c.LogDir, opts.DashboardURL)
			return err
		}},
	}
	if opts.Kueue {
		phases = append(phases, struct {
			name string
			run  func() error
		}{"Kueue", func() error { return c.StartKueue(ctx) }})
	}
	for _, p := range phases {
		start := time.Now()
		if err := p.run(); err != nil {
			return nil, err
		}
		if opts.Logf != nil {
			opts.Logf("cluster: %s in %s", p.name, time.Since(start).Round(time.Millisecond))
		}
	}
	return c, nil
}

func (o *Options) validate() error {
	if o.DashboardURL != "" {
		u, err := url.Parse(o.DashboardURL)
		// KubeRay's dashboard client speaks plain HTTP to host:port.
		if err != nil || u.Host == "" || u.Scheme != "http" {
			return fmt.Errorf("dashboard URL %q: want http://host:port", o.DashboardURL)
		}
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "127.1.0.0/16"
	}
	if err := checkLoopbackCIDR(o.PodCIDR); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if n.Name == "" || seen[n.Name] {
			return fmt.Errorf("node name %q: empty or repeated", n.Name)
		}
		seen[n.Name] = true
	}
	return nil
}

// Stop stops the operator and every process in reverse order of start and
// removes the temporary log directory (unless Options.KeepLogs). It waits
// for each process to exit, killing it when ctx ends.
func (c *Cluster) Stop(ctx context.Context) error {
	return c.stop(ctx, false)
}

func (c *Cluster) stop(ctx context.Context, keep bool) error {
	var errs []error
	if c.operator != nil {
		errs = append(errs, c.operator.stop(ctx))
		c.operator = nil
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].stop(ctx))
	}
	c.procs = nil
	if c.kubelet != nil {
		c.kubelet.stop()
		c.kubelet = nil
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop API server and etcd: %w", err))
		}
		c.env = nil
	}
	for _, f := range c.logs {
		f.Close()
	}
	c.logs = nil
	if c.tmpLog && !c.keepLogs && !keep {
		errs = append(errs, os.RemoveAll(c.LogDir))
	}
	return errors.Join(errs...)
}

// LogFiles returns the component log files in LogDir.
func (c *Cluster) LogFiles() []string {
	files, _ := filepath.Glob(filepath.Join(c.LogDir, "*.log"))
	return files
}

// AddUser provisions a user authenticated by a client certificate, with
// the given groups and no other rights, e.g. to run a step under an RBAC
// Role bound to that user.
func (c *Cluster) AddUser(name string, groups ...string) (*envtest.AuthenticatedUser, error) {
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", name, err)
	}
	return u, nil
}
