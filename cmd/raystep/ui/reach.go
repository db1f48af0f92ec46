package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner/kuberay"
)

// Head is how the server reaches one cluster's Ray dashboard: the same
// access a step has. Token never leaves the server: it goes upstream only.
type Head struct {
	// URL is the dashboard's base URL, e.g. http://127.0.0.1:8265.
	URL string
	// Token is the cluster's Ray token, empty without token authentication.
	Token string
	// Headers are sent upstream with every request.
	Headers http.Header
}

// Client is a Jobs API client of h.
func (h Head) Client() (*raysubmit.Client, error) {
	return raysubmit.New(raysubmit.Config{BaseURL: h.URL, Token: h.Token, Headers: h.Headers, UserAgent: "raystep-ui"})
}

// Reach finds how to reach the dashboard of the cluster r describes.
type Reach func(ctx context.Context, r *Record) (Head, error)

// ErrNoDashboard is returned for a cluster that has no dashboard to reach
// (yet, or any more).
var ErrNoDashboard = errors.New("no Ray dashboard to reach")

// KubeHeads reaches the dashboards of KubeRay clusters as steps do: by
// the head service's cluster DNS name when the server runs in a pod, else
// by a port-forward to the head pod, opened on first use and kept (and
// opened again once it ended) until Close. Tokens come from the Secret
// raystep created for the cluster.
type KubeHeads struct {
	// Interactive finds RayClusters, their head pods and their tokens.
	Interactive *kuberay.Interactive
	// Config is the credentials port-forwards use.
	Config *rest.Config
	// InCluster says to use cluster DNS instead of port-forwards.
	InCluster bool

	mu       sync.Mutex
	forwards map[string]*kuberay.HeadForward
	closed   bool
}

// Reach returns how to reach r's dashboard; r is a KubeRay record.
func (k *KubeHeads) Reach(ctx context.Context, r *Record) (Head, error) {
	name := r.Name
	if r.ClusterKind == fleet.KindStep {
		name = r.RayCluster
	}
	if name == "" {
		return Head{}, fmt.Errorf("%s %s/%s has no RayCluster yet: %w", r.ClusterKind, r.Namespace, r.Name, ErrNoDashboard)
	}
	// A list by name, not a get: the UI's Role grants list and watch only.
	list, err := k.Interactive.Ray.RayV1().RayClusters(r.Namespace).List(ctx,
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return Head{}, fmt.Errorf("find RayCluster %s/%s: %w", r.Namespace, name, err)
	}
	if len(list.Items) == 0 {
		return Head{}, fmt.Errorf("RayCluster %s/%s is gone: %w", r.Namespace, name, ErrNoDashboard)
	}
	rc := &list.Items[0]
	token, err := k.Interactive.ReadToken(ctx, rc)
	if err != nil {
		return Head{}, err
	}
	if k.InCluster {
		url := kuberay.ClusterDashboardURL(rc)
		if url == "" {
			return Head{}, fmt.Errorf("RayCluster %s/%s has no head service yet: %w", rc.Namespace, rc.Name, ErrNoDashboard)
		}
		return Head{URL: url, Token: token}, nil
	}
	url, err := k.forward(ctx, rc)
	return Head{URL: url, Token: token}, err
}

// forward returns the local URL of the open port-forward to rc's head,
// opening one when there is none or the last one ended.
func (k *KubeHeads) forward(ctx context.Context, rc *rayv1.RayCluster) (string, error) {
	key := rc.Namespace + "/" + rc.Name + "/" + string(rc.UID)
	k.mu.Lock()
	defer k.mu.Unlock() // one dial at a time: a page's requests share it
	if k.closed {
		return "", fmt.Errorf("RayCluster %s/%s: %w: the server is stopping", rc.Namespace, rc.Name, ErrNoDashboard)
	}
	if f, ok := k.forwards[key]; ok {
		select {
		case <-f.Done():
		default:
			return f.URL, nil
		}
	}
	f, err := k.Interactive.ForwardHead(ctx, k.Config, rc, 0, kuberay.DashboardPort(rc))
	if err != nil {
		return "", err
	}
	if k.forwards == nil {
		k.forwards = map[string]*kuberay.HeadForward{}
	}
	k.forwards[key] = f
	return f.URL, nil
}

// Close closes every port-forward.
func (k *KubeHeads) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	for key, f := range k.forwards {
		f.Close()
		delete(k.forwards, key)
	}
}
