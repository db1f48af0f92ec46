package cluster

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeLabels are the labels a kubelet sets on its node.
func nodeLabels(name string) map[string]string {
	return map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
}

// createNodes creates the nodes, as a kubelet registers itself (with its
// capacity in the status), and waits until kwok has made each Ready and
// the node lifecycle controller has lifted the not-ready taints.
func (c *Cluster) createNodes(ctx context.Context, specs []NodeSpec) error {
	for _, s := range specs {
		if err := c.AddNode(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// AddNode creates one fake node and waits until it is Ready and
// schedulable. A node that already exists is an error.
func (c *Cluster) AddNode(ctx context.Context, s NodeSpec) error {
	labels := nodeLabels(s.Name)
	maps.Copy(labels, s.Labels)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Labels:      labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{Taints: s.Taints},
		Status: corev1.NodeStatus{
			Capacity:    s.Capacity.DeepCopy(),
			Allocatable: s.Capacity.DeepCopy(),
		},
	}
	if _, err := c.Clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", s.Name, err)
	}
	return c.waitNodeReady(ctx, s.Name)
}

// waitNodeReady polls until the node is Ready without a taint the node
// lifecycle controller manages, and names kwok's kubelet server as its
// kubelet.
func (c *Cluster) waitNodeReady(ctx context.Context, name string) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	state := "not seen"
	for {
		n, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			state = nodeState(n)
			if state == "" {
				state = c.kubeletState(n)
			}
			if state == "" {
				return nil
			}
		case !apierrors.IsNotFound(err):
			state = err.Error()
		}
		for _, p := range c.procs {
			if err := p.exited(); err != nil {
				return fmt.Errorf("wait for node %s: %w", name, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for node %s to be ready: %w (%s)", name, context.Cause(ctx), state)
		case <-tick.C:
		}
	}
}

// nodeState returns "" for a Ready, schedulable node, else why it is not.
func nodeState(n *corev1.Node) string {
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "not Ready"
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return "tainted " + t.Key
		}
	}
	if n.Spec.Unschedulable {
		return "unschedulable"
	}
	return ""
}

// kubeletState returns "" when the node's status names the kubelet relay
// (InternalIP 127.0.0.1 and its port) as its kubelet, else what it names.
func (c *Cluster) kubeletState(n *corev1.Node) string {
	port, err := c.kubeletPort()
	if err != nil {
		return err.Error()
	}
	got := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	ip := ""
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip != "127.0.0.1" || got != port {
		return fmt.Sprintf("kubelet at %s:%d, want 127.0.0.1:%d", ip, got, port)
	}
	return ""
}
