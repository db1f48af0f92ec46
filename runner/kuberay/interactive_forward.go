package kuberay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

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
// `raystep notebook`, the UI, up --notebook). Like a step's, it is opened
// again on the same local port when it breaks: client-go ends a whole
// forward when one of its connections fails upstream (a refused or reset
// connection to the pod's port), and a URL already handed out, to a
// browser or to a Jobs API client, must keep working. It ends for good
// only when Close is called or when it cannot be opened again for
// HeadForwardGiveUp.
type HeadForward struct {
	// URL is the forward's local address, http://127.0.0.1:PORT.
	URL string
	// Pod is the head pod it first went to; once opened again it goes
	// to the cluster's running head, which may be a new pod.
	Pod   string
	stop  chan struct{}
	once  sync.Once
	ended chan struct{}
	err   error // why it ended, set before ended is closed
}

// HeadForwardGiveUp is how long a broken HeadForward keeps trying to
// open again before it ends.
const HeadForwardGiveUp = defaultForwardGiveUp

// Done is closed when the forward ended for good: it could not be opened
// again (the head pod went; Err says why), or Close was called.
func (f *HeadForward) Done() <-chan struct{} { return f.ended }

// Err is why the forward ended, once Done is closed; nil after Close.
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
// remote, with the credentials of cfg. The forward outlives ctx: it lasts
// until Close.
func (i *Interactive) ForwardHead(ctx context.Context, cfg *rest.Config, rc *rayv1.RayCluster, local, remote uint16) (*HeadForward, error) {
	pod, err := i.runningHead(ctx, rc)
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	port, done, err := dialPod(ctx, cfg, i.Kube, rc.Namespace, pod, local, remote, stop)
	// A stream to the kubelet cut while it opens (a kubelet restarting,
	// an API server shedding load) is tried again, as a forward that broke
	// later would be: twice, after 1 s and 2 s, within ctx.
	for wait := time.Second; err != nil && wait <= 2*time.Second && ctx.Err() == nil; wait *= 2 {
		i.Notify.info(fmt.Sprintf("port-forward to pod %s/%s failed, trying again in %s: %v", rc.Namespace, pod, wait, err))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			port, done, err = dialPod(ctx, cfg, i.Kube, rc.Namespace, pod, local, remote, stop)
		}
	}
	if err != nil {
		return nil, err
	}
	f := &HeadForward{URL: "http://127.0.0.1:" + strconv.Itoa(int(port)), Pod: pod, stop: stop, ended: make(chan struct{})}
	go func() {
		defer close(f.ended)
		f.err = f.keep(done, i.Notify, func(ctx context.Context) (<-chan error, error) {
			pod, err := i.runningHead(ctx, rc)
			if err != nil {
				return nil, err
			}
			_, done, err := dialPod(ctx, cfg, i.Kube, rc.Namespace, pod, port, remote, stop)
			return done, err
		})
	}()
	return f, nil
}

// keep waits until the forward whose end done reports ends, and opens it
// again with dial whenever it broke rather than stopped, backing off
// between failed attempts. It returns nil once stopped, and dial's last
// error once it failed for HeadForwardGiveUp. A break mended at the first
// attempt is routine (every refused connection ends a forward) and goes
// unsaid; an outage is told to notify, and its end too.
func (f *HeadForward) keep(done <-chan error, notify Notify, dial func(context.Context) (<-chan error, error)) error {
	for {
		select {
		case <-f.stop:
			<-done
			return nil
		case <-done:
			select {
			case <-f.stop:
				return nil
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), HeadForwardGiveUp)
		var err error
		done, err = f.reopen(ctx, notify, dial)
		cancel()
		if err != nil {
			if errors.Is(err, errForwardStopped) {
				return nil
			}
			return err
		}
	}
}

// reopen dials until a forward works, or until ctx ends or the forward
// is stopped.
func (f *HeadForward) reopen(ctx context.Context, notify Notify, dial func(context.Context) (<-chan error, error)) (<-chan error, error) {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		done, err := dial(ctx)
		if err == nil {
			if attempt > 1 {
				notify.info(fmt.Sprintf("port-forward %s open again (attempt %d)", f.URL, attempt))
			}
			return done, nil
		}
		if attempt == 1 {
			notify.warn(fmt.Sprintf("port-forward %s broke and does not open again yet; trying for %s: %v", f.URL, HeadForwardGiveUp, err))
		}
		timer := time.NewTimer(wait)
		select {
		case <-f.stop:
			timer.Stop()
			return nil, errForwardStopped
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("port-forward to %s broke and could not be opened again for %s (attempts: %d): %w",
				f.URL, HeadForwardGiveUp, attempt, err)
		case <-timer.C:
		}
		wait = min(2*wait, forwardBackoffMax)
	}
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
