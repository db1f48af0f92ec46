// Package kubeapi is the typed Kubernetes API that raystep uses: pods,
// secrets, events, service account tokens, leases, access reviews, and
// KubeRay's RayJobs and RayClusters, on one HTTP client and rate limiter
// as client-go's clientsets share them.
//
// It exists for what raystep does not use. client-go's clientset, and
// KubeRay's (through its discovery client), link every built-in API group
// and register all of their types at start-up, which every raystep command
// paid, `raystep run` on a laptop head included: on a 2-core machine,
// 3 ms of CPU for `raystep version` and 6 ms for a trivial step, about
// 9 MiB of peak resident memory each, and 40% of the binary (53 MB to 32
// MB; test/bench/startup/linkfloor measures what the linked packages
// cost).
// The clients here are client-go's own generic ones (gentype) over a
// scheme of only the groups above, so a request, a watch and an error read
// exactly as through the clientsets.
//
// The interfaces are the clientsets' method sets, narrowed: a clientset's
// typed client satisfies the one of its resource, so tests can hand
// client-go's and KubeRay's fake clientsets in through kubeapitest.
package kubeapi

import (
	"context"
	"fmt"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Resource is one kind of object in one namespace (or cluster-wide), as
// client-go's typed clients serve it.
type Resource[T runtime.Object, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// StatusResource is a Resource with a status subresource.
type StatusResource[T runtime.Object, L runtime.Object] interface {
	Resource[T, L]
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// Interface is the built-in part of the API.
type Interface interface {
	CoreV1() CoreV1Interface
	CoordinationV1() CoordinationV1Interface
	AuthorizationV1() AuthorizationV1Interface
}

// RayInterface is KubeRay's part of the API.
type RayInterface interface {
	RayV1() RayV1Interface
}

// CoreV1Interface is the core group: the pods of Ray clusters, the secrets
// raystep keeps their tokens in, the events it records, and tokens of
// service accounts.
type CoreV1Interface interface {
	// RESTClient builds the requests that have no typed method (a pod's
	// port-forward).
	RESTClient() rest.Interface
	Pods(namespace string) StatusResource[*corev1.Pod, *corev1.PodList]
	Secrets(namespace string) Resource[*corev1.Secret, *corev1.SecretList]
	Events(namespace string) Resource[*corev1.Event, *corev1.EventList]
	ServiceAccounts(namespace string) ServiceAccountInterface
}

// ServiceAccountInterface makes tokens of the service accounts of a
// namespace.
type ServiceAccountInterface interface {
	CreateToken(ctx context.Context, name string, req *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// CoordinationV1Interface is the leases that say a step is alive.
type CoordinationV1Interface interface {
	Leases(namespace string) Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
}

// AuthorizationV1Interface asks the API server what the caller may do.
type AuthorizationV1Interface interface {
	SelfSubjectAccessReviews() SelfSubjectAccessReviewInterface
}

// SelfSubjectAccessReviewInterface creates access reviews; they are never
// stored, so there is nothing else to do with them.
type SelfSubjectAccessReviewInterface interface {
	Create(ctx context.Context, review *authorizationv1.SelfSubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SelfSubjectAccessReview, error)
}

// RayV1Interface is KubeRay's ray.io/v1 group.
type RayV1Interface interface {
	RayJobs(namespace string) StatusResource[*rayv1.RayJob, *rayv1.RayJobList]
	RayClusters(namespace string) StatusResource[*rayv1.RayCluster, *rayv1.RayClusterList]
}

// Clientset serves Interface and RayInterface from one REST config.
type Clientset struct {
	core, coordination, authorization, ray *rest.RESTClient
}

var (
	_ Interface    = (*Clientset)(nil)
	_ RayInterface = (*Clientset)(nil)
)

// codecs are the scheme of the groups above and its serializers (JSON,
// YAML and protobuf, as client-go's), built on first use so that commands
// that never talk to Kubernetes do not pay for them.
var codecs = sync.OnceValues(func() (*runtime.Scheme, serializer.CodecFactory) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	groups := runtime.SchemeBuilder{
		corev1.AddToScheme, coordinationv1.AddToScheme, authorizationv1.AddToScheme,
		authenticationv1.AddToScheme, rayv1.AddToScheme,
	}
	utilruntime.Must(groups.AddToScheme(s))
	return s, serializer.NewCodecFactory(s)
})

// parameterCodec turns options into query parameters.
var parameterCodec = sync.OnceValue(func() runtime.ParameterCodec {
	s, _ := codecs()
	return runtime.NewParameterCodec(s)
})

// NewForConfig builds the clients from c as client-go's clientsets do:
// c's user agent (client-go's default when empty), one HTTP client, and one
// rate limiter for all groups when c sets a QPS.
func NewForConfig(c *rest.Config) (*Clientset, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	_, cf := codecs()
	client := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		gc := cfg
		gc.GroupVersion, gc.APIPath = &gv, apiPath
		gc.NegotiatedSerializer = cf.WithoutConversion()
		return rest.RESTClientForConfigAndClient(&gc, httpClient)
	}
	var cs Clientset
	for _, g := range []struct {
		into    **rest.RESTClient
		gv      schema.GroupVersion
		apiPath string
	}{
		{&cs.core, corev1.SchemeGroupVersion, "/api"},
		{&cs.coordination, coordinationv1.SchemeGroupVersion, "/apis"},
		{&cs.authorization, authorizationv1.SchemeGroupVersion, "/apis"},
		{&cs.ray, rayv1.GroupVersion, "/apis"},
	} {
		if *g.into, err = client(g.gv, g.apiPath); err != nil {
			return nil, err
		}
	}
	return &cs, nil
}

// CoreV1 is the core group.
func (c *Clientset) CoreV1() CoreV1Interface { return coreV1{c.core} }

// CoordinationV1 is the coordination.k8s.io group.
func (c *Clientset) CoordinationV1() CoordinationV1Interface { return coordinationV1{c.coordination} }

// AuthorizationV1 is the authorization.k8s.io group.
func (c *Clientset) AuthorizationV1() AuthorizationV1Interface {
	return authorizationV1{c.authorization}
}

// RayV1 is KubeRay's ray.io/v1 group.
func (c *Clientset) RayV1() RayV1Interface { return rayV1{c.ray} }

type coreV1 struct{ c *rest.RESTClient }

func (g coreV1) RESTClient() rest.Interface { return g.c }

func (g coreV1) Pods(ns string) StatusResource[*corev1.Pod, *corev1.PodList] {
	return gentype.NewClientWithList("pods", g.c, parameterCodec(), ns,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())
}

func (g coreV1) Secrets(ns string) Resource[*corev1.Secret, *corev1.SecretList] {
	return gentype.NewClientWithList("secrets", g.c, parameterCodec(), ns,
		func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} },
		gentype.PrefersProtobuf[*corev1.Secret]())
}

func (g coreV1) Events(ns string) Resource[*corev1.Event, *corev1.EventList] {
	return gentype.NewClientWithList("events", g.c, parameterCodec(), ns,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} },
		gentype.PrefersProtobuf[*corev1.Event]())
}

func (g coreV1) ServiceAccounts(ns string) ServiceAccountInterface {
	return serviceAccounts{g.c, ns}
}

type serviceAccounts struct {
	c  *rest.RESTClient
	ns string
}

// CreateToken asks for a token of service account name (its token
// subresource), as client-go's typed client does.
func (s serviceAccounts) CreateToken(ctx context.Context, name string, req *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	out := &authenticationv1.TokenRequest{}
	err := s.c.Post().UseProtobufAsDefault().
		Namespace(s.ns).Resource("serviceaccounts").Name(name).SubResource("token").
		VersionedParams(&opts, parameterCodec()).Body(req).Do(ctx).Into(out)
	return out, err
}

type coordinationV1 struct{ c *rest.RESTClient }

func (g coordinationV1) Leases(ns string) Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return gentype.NewClientWithList("leases", g.c, parameterCodec(), ns,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

type authorizationV1 struct{ c *rest.RESTClient }

func (g authorizationV1) SelfSubjectAccessReviews() SelfSubjectAccessReviewInterface {
	return gentype.NewClient("selfsubjectaccessreviews", g.c, parameterCodec(), "",
		func() *authorizationv1.SelfSubjectAccessReview { return &authorizationv1.SelfSubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SelfSubjectAccessReview]())
}

type rayV1 struct{ c *rest.RESTClient }

// RayJobs and RayClusters are custom resources: JSON only.
func (g rayV1) RayJobs(ns string) StatusResource[*rayv1.RayJob, *rayv1.RayJobList] {
	return gentype.NewClientWithList("rayjobs", g.c, parameterCodec(), ns,
		func() *rayv1.RayJob { return &rayv1.RayJob{} }, func() *rayv1.RayJobList { return &rayv1.RayJobList{} })
}

func (g rayV1) RayClusters(ns string) StatusResource[*rayv1.RayCluster, *rayv1.RayClusterList] {
	return gentype.NewClientWithList("rayclusters", g.c, parameterCodec(), ns,
		func() *rayv1.RayCluster { return &rayv1.RayCluster{} },
		func() *rayv1.RayClusterList { return &rayv1.RayClusterList{} })
}
