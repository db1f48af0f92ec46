package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// DashboardPort is the Ray dashboard's port on every head pod. kwok
// forwards it to Options.DashboardURL, so that `kubectl port-forward` and
// raystep's own port-forward to a head pod reach the real Ray head.
const DashboardPort = 8265

// dashboardForward is kwok's ClusterPortForward that sends port 8265 of
// every pod to the Ray head (address, port).
const dashboardForward = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: raystep-ray-dashboard
spec:
  forwards:
  - ports: [%d]
    target:
      address: %q
      port: %s
`

// writeDashboardForward writes the ClusterPortForward for dashboardURL into
// dir and returns its path, or "" without a dashboard.
func writeDashboardForward(dir, dashboardURL string) (string, error) {
	if dashboardURL == "" {
		return "", nil
	}
	u, err := url.Parse(dashboardURL)
	if err != nil {
		return "", fmt.Errorf("dashboard URL %q: %w", dashboardURL, err)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = strconv.Itoa(DashboardPort)
	}
	path := filepath.Join(dir, "raystep-dashboard-forward.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, dashboardForward, DashboardPort, host, port), 0o644); err != nil {
		return "", fmt.Errorf("write kwok port-forward: %w", err)
	}
	return path, nil
}

// loopbackForward is kwok's ClusterPortForward that sends one port of
// every pod to the same port of 127.0.0.1.
const loopbackForward = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: raystep-loopback-%d
spec:
  forwards:
  - ports: [%d]
    target:
      address: 127.0.0.1
      port: %d
`

// writeLoopbackForward writes the ClusterPortForwards of ports into dir
// and returns the file's path, or "" without ports.
func writeLoopbackForward(dir string, ports []int) (string, error) {
	if len(ports) == 0 {
		return "", nil
	}
	var docs []byte
	for k, p := range ports {
		if k > 0 {
			docs = append(docs, "---\n"...)
		}
		docs = fmt.Appendf(docs, loopbackForward, p, p, p)
	}
	path := filepath.Join(dir, "raystep-loopback-forward.yaml")
	if err := os.WriteFile(path, docs, 0o644); err != nil {
		return "", fmt.Errorf("write kwok port-forward: %w", err)
	}
	return path, nil
}

// kubeletRelay stands between the API server and kwok's kubelet server (the
// port every node's status names): it copies each connection to kwok, and
// lets a test cut them all, as a kubelet restart or a network drop does.
type kubeletRelay struct {
	ln     net.Listener
	target string // kwok's own address
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	refuse bool
	wg     sync.WaitGroup
}

// startKubeletRelay listens on a free loopback port and relays to target.
func startKubeletRelay(target string) (*kubeletRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the kubelet relay: %w", err)
	}
	r := &kubeletRelay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// port is the port the nodes' status names.
func (r *kubeletRelay) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

func (r *kubeletRelay) accept() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		if !r.track(in) {
			in.Close()
			continue
		}
		r.wg.Add(1)
		go r.relay(in)
	}
}

// track registers c, or says no once the relay is shut.
func (r *kubeletRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *kubeletRelay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// relay copies in to kwok and back until either side closes.
func (r *kubeletRelay) relay(in net.Conn) {
	defer r.wg.Done()
	defer r.untrack(in)
	out, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	if !r.track(out) {
		out.Close()
		return
	}
	defer r.untrack(out)
	done := make(chan struct{}, 2)
	for _, p := range [][2]net.Conn{{out, in}, {in, out}} {
		go func() { _, _ = io.Copy(p[0], p[1]); done <- struct{}{} }()
	}
	<-done // one side ended: end both
	in.Close()
	out.Close()
	<-done
}

// cut closes every relayed connection and returns how many there were.
func (r *kubeletRelay) cut() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.conns)
	for c := range r.conns {
		c.Close()
	}
	return n
}

// shut cuts every connection and closes every new one at once.
func (r *kubeletRelay) shut() {
	r.mu.Lock()
	r.refuse = true
	r.mu.Unlock()
	r.cut()
}

// stop closes the listener and every connection and waits for the relay.
func (r *kubeletRelay) stop() {
	err := r.ln.Close()
	r.shut()
	if err == nil {
		r.wg.Wait()
	}
}

// CutKubeletStreams closes every connection the API server holds to the
// nodes' kubelet (kwok): each port-forward, log or exec stream through it
// breaks, as when a kubelet restarts. New connections are accepted. It
// returns how many connections it closed.
func (c *Cluster) CutKubeletStreams() int {
	if c.kubelet == nil {
		return 0
	}
	return c.kubelet.cut()
}

// errNoKubelet is returned by kubeletPort before kwok started.
var errNoKubelet = errors.New("kwok's kubelet server is not started")

// kubeletPort is the port the nodes must name as their kubelet's.
func (c *Cluster) kubeletPort() (int, error) {
	if c.kubelet == nil {
		return 0, errNoKubelet
	}
	return c.kubelet.port(), nil
}
