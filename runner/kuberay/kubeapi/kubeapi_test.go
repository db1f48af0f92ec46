package kubeapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// apiServer answers as the API server would: the request's path names
// what was asked, a RayJob that exists is returned as JSON, anything else
// is a NotFound Status.
type apiServer struct {
	mu       sync.Mutex
	requests []string // "METHOD path"
	agents   []string
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.agents = append(s.agents, r.UserAgent())
	s.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/apis/ray.io/v1/namespaces/ml/rayjobs/train":
		_ = json.NewEncoder(w).Encode(rayv1.RayJob{
			TypeMeta:   metav1.TypeMeta{APIVersion: "ray.io/v1", Kind: "RayJob"},
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
			Status:     rayv1.RayJobStatus{JobStatus: rayv1.JobStatusRunning},
		})
	case strings.HasSuffix(r.URL.Path, "/token"):
		_ = json.NewEncoder(w).Encode(authenticationv1.TokenRequest{
			TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
			Status:   authenticationv1.TokenRequestStatus{Token: "minted"},
		})
	case r.URL.Path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		_ = json.NewEncoder(w).Encode(authorizationv1.SelfSubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"},
			Status:   authorizationv1.SubjectAccessReviewStatus{Allowed: true},
		})
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
			Message: "not found: " + r.URL.Path,
		})
	}
}

// TestRequestsReachTheirResources checks that each client asks for its
// group's path, decodes what the API server returns, and turns a
// NotFound Status into the error apierrors recognizes, as client-go's
// clientsets do.
func TestRequestsReachTheirResources(t *testing.T) {
	api := &apiServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cs, err := kubeapi.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	job, err := cs.RayV1().RayJobs("ml").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "train" || job.Status.JobStatus != rayv1.JobStatusRunning {
		t.Errorf("got RayJob %s in %s, want train RUNNING", job.Name, job.Status.JobStatus)
	}
	if _, err := cs.RayV1().RayClusters("ml").Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing RayCluster gave %v, want NotFound", err)
	}
	if _, err := cs.CoreV1().Secrets("ml").Get(ctx, "ui-auth", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing Secret gave %v, want NotFound", err)
	}
	if _, err := cs.CoordinationV1().Leases("ml").Get(ctx, "step", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing Lease gave %v, want NotFound", err)
	}
	if err := cs.CoreV1().Pods("ml").Delete(ctx, "head", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleting a missing pod gave %v, want NotFound", err)
	}
	if _, err := cs.CoreV1().Events("ml").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("listing events gave %v, want the server's NotFound", err)
	}
	tok, err := cs.CoreV1().ServiceAccounts("ml").CreateToken(ctx, "raystep", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil || tok.Status.Token != "minted" {
		t.Errorf("CreateToken gave %v, %v; want the minted token", tok, err)
	}
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{}, metav1.CreateOptions{})
	if err != nil || !review.Status.Allowed {
		t.Errorf("access review gave %v, %v; want allowed", review, err)
	}
	// The port-forward's request is built on the core group's REST client.
	if u := cs.CoreV1().RESTClient().Post().Namespace("ml").Resource("pods").Name("head").SubResource("portforward").URL(); u.Path != "/api/v1/namespaces/ml/pods/head/portforward" {
		t.Errorf("port-forward URL %s", u.Path)
	}

	want := []string{
		"GET /apis/ray.io/v1/namespaces/ml/rayjobs/train",
		"GET /apis/ray.io/v1/namespaces/ml/rayclusters/gone",
		"GET /api/v1/namespaces/ml/secrets/ui-auth",
		"GET /apis/coordination.k8s.io/v1/namespaces/ml/leases/step",
		"DELETE /api/v1/namespaces/ml/pods/head",
		"GET /api/v1/namespaces/ml/events",
		"POST /api/v1/namespaces/ml/serviceaccounts/raystep/token",
		"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
	}
	if strings.Join(api.requests, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(api.requests, "\n"), strings.Join(want, "\n"))
	}
	for _, a := range api.agents {
		if a != rest.DefaultKubernetesUserAgent() {
			t.Errorf("user agent %q, want client-go's default when the config sets none", a)
			break
		}
	}
}

// TestTheBinaryLinksNoClientset checks what kubeapi is for: raystep's
// binary links neither client-go's clientset nor its discovery client
// (through which KubeRay's clientset would bring every built-in API group
// back).
func TestTheBinaryLinksNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/raystep/raystep/cmd/raystep").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/scheme", "k8s.io/client-go/discovery",
			"github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned":
			t.Errorf("raystep links %s", pkg)
		}
	}
}
