package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultStages returns kwok's stage sets (directories under the assets'
// stages/) that Start loads: nodes become Ready at once and keep
// heart-beating; pods go through creation, readiness, completion and
// deletion with kwok's realistic delays of 1 to 6 s per phase (a pod can
// override them with the stages' delay annotations); the chaos stages fail
// only pods or nodes that opt in with their labels.
func DefaultStages() []string {
	return []string{"node-fast", "node-heartbeat", "pod-general", "node-chaos", "pod-chaos"}
}

// FastStages returns DefaultStages with pods moving through their phases
// without delay, for tests that need many clusters quickly.
func FastStages() []string {
	return []string{"node-fast", "node-heartbeat", "pod-fast", "node-chaos", "pod-chaos"}
}

// pollInterval is how often Start checks that a component is ready.
const pollInterval = 200 * time.Millisecond

// startComponents starts the controller manager, the scheduler and kwok,
// and waits until the first two report healthy.
func (c *Cluster) startComponents(ctx context.Context, opts Options) error {
	kcm, err := c.startServing(ctx, "kube-controller-manager",
		// podgc deletes the pods of a node that is gone, marking them
		// DisruptionTarget (DeletionByPodGC), as a cloud's node loss does.
		"--controllers=garbagecollector,nodelifecycle,podgc",
		"--use-service-account-credentials=false",
		// kwok's heartbeat stage renews node status every 20 to 45 s;
		// the grace period must outlast that with room for a loaded machine,
		// or nodes flap NotReady and the controller marks their pods unready.
		"--node-monitor-period=1s",
		"--node-monitor-grace-period=2m",
	)
	if err != nil {
		return err
	}
	sched, err := c.startServing(ctx, "kube-scheduler")
	if err != nil {
		return err
	}
	if err := c.startKwok(opts); err != nil {
		return err
	}
	for _, s := range []struct {
		p   *process
		url string
	}{{kcm.p, kcm.url}, {sched.p, sched.url}} {
		if err := waitHealthy(ctx, s.p, s.url); err != nil {
			return err
		}
	}
	return nil
}

type serving struct {
	p   *process
	url string
}

// startServing starts a component that serves /healthz on a free loopback
// port with a self-signed certificate, authenticated as the cluster admin.
func (c *Cluster) startServing(ctx context.Context, name string, extra ...string) (serving, error) {
	port, err := freePort()
	if err != nil {
		return serving{}, err
	}
	args := append([]string{
		"--kubeconfig=" + c.KubeConfigPath,
		"--authentication-kubeconfig=" + c.KubeConfigPath,
		"--authorization-kubeconfig=" + c.KubeConfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.LogDir, name+"-certs"),
	}, extra...)
	p, err := startProcess(name, c.LogDir, filepath.Join(c.AssetsDir, "bin", name), args, nil)
	if err != nil {
		return serving{}, err
	}
	c.procs = append(c.procs, p)
	return serving{p: p, url: fmt.Sprintf("https://127.0.0.1:%d/healthz", port)}, nil
}

// startKwok starts kwok as the kubelet of every node, with pod IPs from the
// loopback range and HOME pointed at the log directory so that no user
// configuration of kwok's applies. Its kubelet server (port-forward, logs,
// exec) listens on a free loopback port behind the kubelet relay, whose
// port every node's status names with InternalIP 127.0.0.1, and forwards
// each pod's port 8265 to Options.DashboardURL and Options.LoopbackPorts
// to 127.0.0.1.
func (c *Cluster) startKwok(opts Options) error {
	stages := opts.KwokStages
	if stages == nil {
		stages = DefaultStages()
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if c.kubelet, err = startKubeletRelay(addr); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + c.KubeConfigPath,
		"--manage-all-nodes=true",
		"--cidr=" + opts.PodCIDR,
		"--node-ip=127.0.0.1",
		"--server-address=" + addr,
		"--node-port=" + strconv.Itoa(c.kubelet.port()),
	}
	for _, s := range stages {
		files, err := filepath.Glob(filepath.Join(c.AssetsDir, "stages", s, "*.yaml"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("kwok stages %q: none in %s", s, filepath.Join(c.AssetsDir, "stages"))
		}
		for _, f := range files {
			args = append(args, "--config="+f)
		}
	}
	home := filepath.Join(c.LogDir, "kwok-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("create kwok home: %w", err)
	}
	own, err := writeOwnStages(home)
	if err != nil {
		return err
	}
	forward, err := writeDashboardForward(home, opts.DashboardURL)
	if err != nil {
		return err
	}
	if forward != "" {
		own = append(own, forward)
	}
	loopback, err := writeLoopbackForward(home, opts.LoopbackPorts)
	if err != nil {
		return err
	}
	if loopback != "" {
		own = append(own, loopback)
	}
	for _, f := range own {
		args = append(args, "--config="+f)
	}
	p, err := startProcess("kwok", c.LogDir, filepath.Join(c.AssetsDir, "bin", "kwok"), args, []string{"HOME=" + home})
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// waitHealthy polls url until it answers 200, p exits, or ctx ends.
func waitHealthy(ctx context.Context, p *process, url string) error {
	// The components serve a self-signed certificate on loopback.
	hc := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback, self-signed
	}
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		if err := p.exited(); err != nil {
			return err
		}
		last = probe(ctx, hc, url)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be healthy: %w (last: %v)", p.name, context.Cause(ctx), last)
		case <-tick.C:
		}
	}
}

func probe(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
