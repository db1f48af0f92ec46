// Package kubeapitest hands client-go's and KubeRay's clientsets, fake
// ones above all, to code that takes kubeapi's interfaces. Only tests link
// it: it links both clientsets whole, which is what kubeapi avoids.
package kubeapitest

import (
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// Kube is kube as a kubeapi.Interface.
func Kube(kube kubernetes.Interface) kubeapi.Interface { return kubeClient{kube} }

// Ray is ray as a kubeapi.RayInterface.
func Ray(ray rayclient.Interface) kubeapi.RayInterface { return rayClient{ray} }

type kubeClient struct{ k kubernetes.Interface }

// IsWatchListSemanticsUnSupported passes on what the clientset says of
// streamed lists (client-go's fakes do not stream them).
func (c kubeClient) IsWatchListSemanticsUnSupported() bool { return unsupported(c.k) }

func (c kubeClient) CoreV1() kubeapi.CoreV1Interface { return core{c.k} }

func (c kubeClient) CoordinationV1() kubeapi.CoordinationV1Interface { return coordination{c.k} }

func (c kubeClient) AuthorizationV1() kubeapi.AuthorizationV1Interface {
	return authorization{c.k}
}

type core struct{ k kubernetes.Interface }

func (c core) RESTClient() rest.Interface { return c.k.CoreV1().RESTClient() }

func (c core) Pods(ns string) kubeapi.StatusResource[*corev1.Pod, *corev1.PodList] {
	return c.k.CoreV1().Pods(ns)
}

func (c core) Secrets(ns string) kubeapi.Resource[*corev1.Secret, *corev1.SecretList] {
	return c.k.CoreV1().Secrets(ns)
}

func (c core) Events(ns string) kubeapi.Resource[*corev1.Event, *corev1.EventList] {
	return c.k.CoreV1().Events(ns)
}

func (c core) ServiceAccounts(ns string) kubeapi.ServiceAccountInterface {
	return c.k.CoreV1().ServiceAccounts(ns)
}

type coordination struct{ k kubernetes.Interface }

func (c coordination) Leases(ns string) kubeapi.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return c.k.CoordinationV1().Leases(ns)
}

type authorization struct{ k kubernetes.Interface }

func (c authorization) SelfSubjectAccessReviews() kubeapi.SelfSubjectAccessReviewInterface {
	return c.k.AuthorizationV1().SelfSubjectAccessReviews()
}

type rayClient struct{ r rayclient.Interface }

// IsWatchListSemanticsUnSupported: as kubeClient's.
func (c rayClient) IsWatchListSemanticsUnSupported() bool { return unsupported(c.r) }

func (c rayClient) RayV1() kubeapi.RayV1Interface { return rayGroup{c.r} }

type rayGroup struct{ r rayclient.Interface }

func (g rayGroup) RayJobs(ns string) kubeapi.StatusResource[*rayv1.RayJob, *rayv1.RayJobList] {
	return g.r.RayV1().RayJobs(ns)
}

func (g rayGroup) RayClusters(ns string) kubeapi.StatusResource[*rayv1.RayCluster, *rayv1.RayClusterList] {
	return g.r.RayV1().RayClusters(ns)
}

// unsupported is whether client says it cannot stream lists.
func unsupported(client any) bool {
	u, ok := client.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// New builds kubeapi's clients, raystep's own, from cfg; it fails tb on
// an error.
func New(tb testing.TB, cfg *rest.Config) *kubeapi.Clientset {
	tb.Helper()
	cs, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}
