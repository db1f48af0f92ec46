package kuberay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// dashboardPort is the Ray dashboard's port on the head pod.
const dashboardPort = 8265

// Dashboard returns how to reach the cluster's Ray dashboard: the explicit
// URL; the head service's cluster DNS name when raystep runs in a pod; or
// a port-forward over SPDY from 127.0.0.1 to the head pod's dashboard
// port, which lives until Teardown (and is opened again if it breaks; the
// step fails when that does not work for PortForwardGiveUp). With Ray's
// token authentication on, it checks that the dashboard takes the token
// (checkToken).
func (c *Cluster) Dashboard(ctx context.Context) (runner.Dashboard, error) {
	d, err := c.reach(ctx)
	if err != nil {
		return d, err
	}
	return d, c.checkToken(ctx, d)
}

// reach returns how to reach the dashboard; see Dashboard.
func (c *Cluster) reach(ctx context.Context) (runner.Dashboard, error) {
	o := c.b.Dashboard
	d := runner.Dashboard{URL: o.URL, Headers: o.Headers, Token: c.token, CAFile: o.CAFile}
	if o.URL != "" {
		return d, nil
	}
	job := c.mon.latestJob()
	if job == nil || job.Status.DashboardURL == "" {
		return d, fmt.Errorf("RayJob %s has no dashboard URL in its status yet", c.Name())
	}
	service := "http://" + strings.TrimPrefix(job.Status.DashboardURL, "http://")
	if o.InCluster {
		d.URL = service
		return d, nil
	}
	local, err := c.portForward(ctx)
	if err != nil {
		return d, err
	}
	d.URL, d.PublicURL = local, service
	return d, nil
}

// forward is a supervised port-forward to the head pod.
type forward struct {
	stop chan struct{} // closed by closeForward
	done chan struct{} // closed when the supervisor returned
}

// dialFunc opens a port-forward from 127.0.0.1:port (0 picks one) and
// returns the local port and a channel that receives when it ends.
type dialFunc func(ctx context.Context, port uint16, stop chan struct{}) (uint16, <-chan error, error)

// How a broken port-forward is opened again: after forwardBackoff,
// doubling up to forwardBackoffMax, until Backend.PortForwardGiveUp
// (default defaultForwardGiveUp) passed without a working one.
const (
	forwardBackoff       = time.Second
	forwardBackoffMax    = 15 * time.Second
	defaultForwardGiveUp = 2 * time.Minute
)

// portForward opens the port-forward and returns its local URL.
func (c *Cluster) portForward(ctx context.Context) (string, error) {
	if c.b.Config == nil {
		return "", errors.New("no dashboard: set RAYSTEP_DASHBOARD_URL, or give raystep a kubeconfig it can port-forward with")
	}
	if err := c.awaitRunningHead(ctx); err != nil {
		return "", err
	}
	f := &forward{stop: make(chan struct{}), done: make(chan struct{})}
	port, fwdDone, err := c.dialForward(ctx, 0, f.stop)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.fwd = f
	c.mu.Unlock()
	go c.superviseForward(f, port, fwdDone, c.dialForward)
	return fmt.Sprintf("http://127.0.0.1:%d", port), nil
}

// superviseForward opens the forward again on the same local port when it
// breaks (the head pod restarted, the connection dropped), until stopped.
// When it cannot for PortForwardGiveUp (the head pod is gone for good),
// it reports the failure on Failures and stops trying.
func (c *Cluster) superviseForward(f *forward, port uint16, fwdDone <-chan error, dial dialFunc) {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case err := <-fwdDone:
			c.b.Notify.warn(fmt.Sprintf("port-forward to the head of %s broke, opening it again: %v", c.Name(), err))
		}
		var err error
		fwdDone, err = c.reopenForward(f, port, dial)
		if err != nil {
			if !errors.Is(err, errForwardStopped) {
				c.report(err)
			}
			return
		}
	}
}

// errForwardStopped ends reopenForward when the step no longer needs it.
var errForwardStopped = errors.New("port-forward stopped")

// reopenForward dials until a forward works, backing off between
// attempts and noting each failure, and gives up after PortForwardGiveUp.
func (c *Cluster) reopenForward(f *forward, port uint16, dial dialFunc) (<-chan error, error) {
	giveUp := c.b.PortForwardGiveUp
	if giveUp <= 0 {
		giveUp = defaultForwardGiveUp
	}
	deadline := time.NewTimer(giveUp)
	defer deadline.Stop()
	wait, expired := forwardBackoff, false
	for attempt := 1; ; attempt++ {
		timer := time.NewTimer(wait)
		select {
		case <-f.stop:
			timer.Stop()
			return nil, errForwardStopped
		case <-c.mon.lifetime().Done():
			timer.Stop()
			return nil, errForwardStopped
		case <-deadline.C:
			timer.Stop()
			expired = true // one last attempt
		case <-timer.C:
		}
		_, done, err := dial(c.mon.lifetime(), port, f.stop)
		if err == nil {
			c.b.Notify.info(fmt.Sprintf("port-forward to the head of %s open again (attempt %d)", c.Name(), attempt))
			return done, nil
		}
		if expired {
			return nil, fmt.Errorf("port-forward to the head of %s: gave up after %s (attempts: %d): %w", c.Name(), giveUp, attempt, err)
		}
		c.b.Notify.info(fmt.Sprintf("port-forward to the head of %s: attempt %d failed, next in %s: %v", c.Name(), attempt, wait, err))
		wait = min(2*wait, forwardBackoffMax)
	}
}

// report sends err on Failures unless a failure was reported already.
func (c *Cluster) report(err error) {
	select {
	case c.failures <- err:
	default:
	}
}

// dialForward starts a port-forward from 127.0.0.1:port (0 picks one) to
// the running head pod's dashboard and returns the local port and a
// channel that receives when the forward ends.
func (c *Cluster) dialForward(ctx context.Context, port uint16, stop chan struct{}) (uint16, <-chan error, error) {
	head, err := c.headPod()
	if err != nil {
		return 0, nil, err
	}
	return dialPod(ctx, c.b.Config, c.b.Kube, c.ns, head, port, dashboardPort, stop)
}

// dialPod starts a port-forward over SPDY from 127.0.0.1:local (0 picks
// one) to port remote of pod ns/pod, and returns the local port and a
// channel that receives when the forward ends (after stop is closed, or
// when the connection breaks).
func dialPod(ctx context.Context, cfg *rest.Config, kube kubeapi.Interface, ns, pod string, local, remote uint16, stop chan struct{}) (uint16, <-chan error, error) {
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return 0, nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	}
	u := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	ready := make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("%d:%d", local, remote)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		return 0, nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		return 0, nil, fmt.Errorf("port-forward to pod %s/%s: %w %s", ns, pod, err, errOut.String())
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("port-forward to pod %s/%s: %w", ns, pod, context.Cause(ctx))
	}
	ports, err := fw.GetPorts()
	if err != nil {
		return 0, nil, fmt.Errorf("port-forward to pod %s/%s: get the local port: %w", ns, pod, err)
	}
	if len(ports) == 0 {
		return 0, nil, fmt.Errorf("port-forward to pod %s/%s: no local port", ns, pod)
	}
	return ports[0].Local, done, nil
}

// awaitRunningHead waits until the pod watch has seen the head pod
// running, for at most PortForwardGiveUp: the RayJob can say its cluster
// is ready before the pod watch, a separate one, has seen the head run.
func (c *Cluster) awaitRunningHead(ctx context.Context) error {
	giveUp := c.b.PortForwardGiveUp
	if giveUp <= 0 {
		giveUp = defaultForwardGiveUp
	}
	wctx, cancel := context.WithTimeout(ctx, giveUp)
	defer cancel()
	err := c.mon.await(wctx, func(v view) (bool, error, time.Duration) {
		return slices.ContainsFunc(v.pods, isRunningHead), nil, 0
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	_, err = c.headPod() // names the RayJob that has no running head
	return err
}

// headPod returns the name of the cluster's running head pod.
func (c *Cluster) headPod() (string, error) {
	if name, ok := c.mon.runningHead(); ok {
		return name, nil
	}
	return "", fmt.Errorf("RayJob %s has no running head pod to port-forward to", c.Name())
}

// closeForward stops the port-forward, if any, and waits for it.
func (c *Cluster) closeForward() {
	c.mu.Lock()
	f := c.fwd
	c.fwd = nil
	c.mu.Unlock()
	if f != nil {
		close(f.stop)
		<-f.done
	}
}
