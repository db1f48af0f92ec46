package kuberay

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolswatch "k8s.io/client-go/tools/watch"
)

// HeadForward is a port-forward from 127.0.0.1 to a port of an
// interactive cluster's running head pod (`raystep dashboard`,
// `raystep notebook`). Unlike a step's, it is not opened again when it
// breaks: the person holding it sees it end and runs the command again.
type HeadForward struct {
	// URL is the forward's local address, http://127.0.0.1:PORT.
	URL string
	// Pod is the head pod it goes to.
	Pod   string
	stop  chan struct{}
	once  sync.Once
	ended chan struct{}
	err   error // why it ended, set before ended is closed
}

// Done is closed when the forward ended: by itself (the head pod went,
// the connection broke; Err says why) or by Close.
func (f *HeadForward) Done() <-chan struct{} { return f.ended }

// Err is why the forward ended, once Done is closed.
func (f *HeadForward) Err() error {
	<-f.ended
	return f.err
}

// Close stops the forward and waits until its local port is closed.
func (f *HeadForward) Close() {
	f.once.Do(func() { close(f.stop) })
	<-f.ended
}

// ForwardHead waits by watch, within ctx, until rc has a running head pod
// and opens a port-forward from 127.0.0.1:local (0 picks one) to its port
// remote, with the credentials of cfg.
func (i *Interactive) ForwardHead(ctx context.Context, cfg *rest.Config, rc *rayv1.RayCluster, local, remote uint16) (*HeadForward, error) {
	pod, err := i.runningHead(ctx, rc)
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	port, done, err := dialPod(ctx, cfg, i.Kube, rc.Namespace, pod, local, remote, stop)
	if err != nil {
		return nil, err
	}
	f := &HeadForward{URL: "http://127.0.0.1:" + strconv.Itoa(int(port)), Pod: pod, stop: stop, ended: make(chan struct{})}
	go func() {
		f.err = <-done
		close(f.ended)
	}()
	return f, nil
}

// runningHead returns the name of rc's running head pod, waiting by
// watch until there is one.
func (i *Interactive) runningHead(ctx context.Context, rc *rayv1.RayCluster) (string, error) {
	pods := i.Kube.CoreV1().Pods(rc.Namespace)
	sel := labels.SelectorFromSet(labels.Set{labelCluster: rc.Name, labelNodeType: string(rayv1.HeadNode)}).String()
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", fmt.Errorf("find the head pod of RayCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	}
	for k := range list.Items {
		if isRunningHead(&list.Items[k]) {
			return list.Items[k].Name, nil
		}
	}
	var name string
	_, err = toolswatch.Until(ctx, list.ResourceVersion, &podWatcher{pods: pods, sel: sel}, func(e watch.Event) (bool, error) {
		p, ok := e.Object.(*corev1.Pod)
		if ok && e.Type != watch.Deleted && isRunningHead(p) {
			name = p.Name
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("RayCluster %s/%s has no running head pod to port-forward to: %w", rc.Namespace, rc.Name, err)
	}
	return name, nil
}

// podWatcher watches the pods of one selector.
type podWatcher struct {
	pods interface {
		Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	}
	sel string
}

func (w *podWatcher) Watch(o metav1.ListOptions) (watch.Interface, error) {
	o.LabelSelector = w.sel
	return w.pods.Watch(context.Background(), o)
}
