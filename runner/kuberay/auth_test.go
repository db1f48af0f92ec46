package kuberay

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/raystep/raystep/schemas"
)

// withRayAuth returns a copy of profile with token auth mode mode.
func withRayAuth(profile *schemas.Profile, mode string) *schemas.Profile {
	p := *profile
	p.Spec.RayAuth = schemas.RayAuth{Mode: mode}
	return &p
}

// withTokenAuth returns a copy of profile that turns token auth on.
func withTokenAuth(profile *schemas.Profile) *schemas.Profile {
	return withRayAuth(profile, schemas.RayAuthToken)
}

func TestBuildTokenAuth(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	step := attempt(spec, identity)
	on := &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, SecretName: ptr(step.ID + "-ray-auth")}
	old := *spec
	old.Spec.Cluster.RayVersion = "2.51.0"
	tests := []struct {
		name    string
		spec    *schemas.Spec
		profile *schemas.Profile
		want    *rayv1.AuthOptions
	}{
		{"default", spec, withRayAuth(profile, schemas.RayAuthDefault), on},
		{"default, Ray 2.51", &old, withRayAuth(profile, schemas.RayAuthDefault), nil},
		{"disabled", spec, withRayAuth(profile, schemas.RayAuthDisabled), nil},
		{"token", spec, withRayAuth(profile, schemas.RayAuthToken), on},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := Build(tt.spec, tt.profile, step)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, job.Spec.RayClusterSpec.AuthOptions); diff != "" {
				t.Errorf("authOptions (-want +got):\n%s", diff)
			}
			if got := AuthSecret(job) != nil; got != (tt.want != nil) {
				t.Errorf("AuthSecret != nil is %v, want %v", got, tt.want != nil)
			}
		})
	}
}

func TestAuthSecret(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	job, err := Build(spec, withTokenAuth(profile), attempt(spec, identity))
	if err != nil {
		t.Fatal(err)
	}
	job.UID = "job-uid"
	s := AuthSecret(job)
	want := []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: job.Name, UID: "job-uid"}}
	if diff := cmp.Diff(want, s.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	if s.Name != *job.Spec.RayClusterSpec.AuthOptions.SecretName || s.Namespace != job.Namespace {
		t.Errorf("Secret %s/%s, want the one authOptions names in %s", s.Namespace, s.Name, job.Namespace)
	}
	if s.Type != corev1.SecretTypeOpaque || s.Immutable == nil || !*s.Immutable || s.Data != nil || s.StringData != nil {
		t.Errorf("Secret type %q, immutable %v, data %v %v: want an immutable Opaque Secret without a token", s.Type, s.Immutable, s.Data, s.StringData)
	}
	if s.Labels[LabelRunID] != identity.RunID || s.Labels[LabelManagedBy] != ManagedByRaystep {
		t.Errorf("labels %v, want the RayJob's", s.Labels)
	}
}

func TestNewAuthTokenIsRandom(t *testing.T) {
	t.Parallel()
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for range 8 {
		tok, err := NewAuthToken()
		if err != nil {
			t.Fatal(err)
		}
		if !hex64.MatchString(tok) || seen[tok] {
			t.Fatalf("token %q: want 64 hex digits (256 bits), each one new", tok)
		}
		seen[tok] = true
	}
}

// rayHead serves GET /api/version as a Ray dashboard with token auth
// does, for the token that token holds when the request comes.
func rayHead(t *testing.T, token *atomic.Value) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "":
			http.Error(w, "Unauthorized: Missing authentication token", http.StatusUnauthorized)
		case "Bearer " + token.Load().(string):
			_, _ = w.Write([]byte(`{"version": "4", "ray_version": "2.60.0"}`))
		default:
			http.Error(w, "Forbidden: Invalid authentication token", http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// tokenFakes are fakes whose profile turns token auth on.
func tokenFakes(t *testing.T, token string, objs ...runtime.Object) *fakes {
	f := newFakes(t, objs...)
	f.b.Profile = withTokenAuth(f.b.Profile)
	f.b.Dashboard.Token = token
	return f
}

// secretToken returns the token the Secret of step id holds, failing the
// test unless it is owned by the RayJob.
func (f *fakes) secretToken(t *testing.T, id string) string {
	t.Helper()
	s, err := f.kube.CoreV1().Secrets(testNS).Get(t.Context(), AuthSecretName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("token Secret: %v", err)
	}
	if len(s.OwnerReferences) != 1 || string(s.OwnerReferences[0].UID) != id+"-uid" {
		t.Errorf("Secret owners %+v, want RayJob %s", s.OwnerReferences, id)
	}
	return string(s.Data[AuthTokenKey])
}

func TestProvisionCreatesTokenSecret(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, fixed string }{{"fresh token", ""}, {"RAYSTEP_DASHBOARD_TOKEN", "fixed-token-of-the-platform"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := tokenFakes(t, tt.fixed)
			var headToken atomic.Value // the token the "head" runs with
			headToken.Store("")
			f.b.Dashboard.URL = rayHead(t, &headToken)
			req := request(0)
			c := f.provision(t, req)
			token := f.secretToken(t, req.ID)
			if token == "" || tt.fixed != "" && token != tt.fixed {
				t.Fatalf("Secret token %q, want %q or a fresh one", token, tt.fixed)
			}
			headToken.Store(token)
			d, err := c.Dashboard(t.Context())
			if err != nil || d.Token != token {
				t.Errorf("Dashboard() = token %q, %v; want the Secret's", d.Token, err)
			}
			headToken.Store("another")
			_, err = c.Dashboard(t.Context())
			want := "refused raystep's token (HTTP 403: Forbidden: Invalid authentication token): the cluster's Ray does not run with the token raystep put in Secret " +
				testNS + "/" + AuthSecretName(req.ID)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), token) {
				t.Errorf("Dashboard() with a head on another token = %v, want %q and no token", err, want)
			}
			for _, n := range f.allNotes() {
				if strings.Contains(n, token) {
					t.Errorf("a note shows the token: %q", n)
				}
			}
		})
	}
}

func TestProvisionReattachReadsTokenSecret(t *testing.T) {
	t.Parallel()
	f := tokenFakes(t, "")
	req := request(0)
	f.provision(t, req)
	token := f.secretToken(t, req.ID)
	second := f.provision(t, req)
	if second.token != token {
		t.Errorf("re-attached with another token than the Secret's")
	}
	f.awaitNote(t, "Ray token of RayJob "+second.Name()+" read from Secret "+testNS+"/"+AuthSecretName(req.ID))
}

func TestProvisionReattachForbiddenToReadSecret(t *testing.T) {
	t.Parallel()
	f := tokenFakes(t, "")
	req := request(0)
	// Reactors are set before the clientset is in use: the Role allows
	// no get on secrets, which only the re-attach tries.
	f.kube.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), AuthSecretName(req.ID), errors.New(`User "raystep" cannot get resource "secrets"`))
	})
	f.provision(t, req)
	cl, err := f.b.Provision(t.Context(), req, f.sink())
	if cl == nil {
		t.Fatal("Provision returned no cluster to tear down")
	}
	t.Cleanup(func() { cl.(*Cluster).stopWatching(t) })
	want := "re-attach to RayJob " + testNS + "/" + req.ID + ": its Ray token is in Secret " + testNS + "/" + AuthSecretName(req.ID) +
		", which raystep may not read: grant get on secrets in namespace " + testNS
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "RAYSTEP_DASHBOARD_TOKEN") {
		t.Fatalf("Provision error = %v, want %q and the RAYSTEP_DASHBOARD_TOKEN way out", err, want)
	}
}

func TestProvisionRefusesSomeoneElsesSecret(t *testing.T) {
	t.Parallel()
	req := request(0)
	f := tokenFakes(t, "")
	if _, err := f.kube.CoreV1().Secrets(testNS).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: AuthSecretName(req.ID), Namespace: testNS},
		Data: map[string][]byte{AuthTokenKey: []byte("theirs")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl, err := f.b.Provision(t.Context(), req, f.sink())
	if cl == nil {
		t.Fatal("Provision returned no cluster: the RayJob it created would stay")
	}
	t.Cleanup(func() { cl.(*Cluster).stopWatching(t) })
	if err == nil || !strings.Contains(err.Error(), "a Secret of that name exists and raystep did not create it for this RayJob") {
		t.Fatalf("Provision error = %v, want a refusal of the Secret", err)
	}
}

// TestRenderShowsTokenSecret: the rendered manifests name the Secret in
// authOptions and show the Secret itself, without any token.
func TestRenderShowsTokenSecret(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	step := attempt(spec, identity)
	job, err := Build(spec, withTokenAuth(profile), step)
	if err != nil {
		t.Fatal(err)
	}
	for format, kind := range map[string]string{"yaml": "kind: Secret", "json": `"kind": "Secret"`} {
		out, err := EncodeWithSecret(job, format)
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		for _, want := range []string{"secretName", AuthSecretName(step.ID), kind, "ownerReferences"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s render lacks %q:\n%s", format, want, s)
			}
		}
		if regexp.MustCompile(`(?m)^\s*"?(data|stringData|uid)"?:`).MatchString(s) {
			t.Errorf("%s render shows data or an empty uid:\n%s", format, s)
		}
	}
}

// TestCheckTokenLeavesOtherFailuresToTheJobsClient: a dashboard that
// drops the connection is not a token problem: one look, no error.
func TestCheckTokenLeavesOtherFailuresToTheJobsClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	f := tokenFakes(t, "")
	f.b.Dashboard.URL = "http://" + ln.Addr().String()
	c := f.provision(t, request(0))
	if _, err := c.Dashboard(t.Context()); err != nil {
		t.Errorf("Dashboard() = %v, want no error: the Jobs client reports a dashboard that does not answer", err)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the token check connected %d times, want once", n)
	}
}

// TestTeardownRestoresDeletedTokenSecret: a token Secret deleted while
// the step ran is made again, with the step's token and owner, before the
// RayJob is deleted (KubeRay needs it to let the RayJob go), and the step
// says so; a Secret still there is left alone, without a word.
func TestTeardownRestoresDeletedTokenSecret(t *testing.T) {
	t.Parallel()
	for _, deleted := range []bool{true, false} {
		t.Run(map[bool]string{true: "deleted", false: "there"}[deleted], func(t *testing.T) {
			t.Parallel()
			f := tokenFakes(t, "")
			req := request(0)
			c := f.provision(t, req)
			token := f.secretToken(t, req.ID)
			name := AuthSecretName(req.ID)
			if deleted {
				if err := f.kube.CoreV1().Secrets(testNS).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var secretThere bool // when the RayJob's delete came
			f.ray.PrependReactor("delete", "rayjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				_, err := f.kube.CoreV1().Secrets(testNS).Get(t.Context(), name, metav1.GetOptions{})
				secretThere = err == nil
				return false, nil, nil
			})
			if err := c.Teardown(t.Context(), false); err != nil {
				t.Fatalf("Teardown: %v", err)
			}
			if !secretThere {
				t.Errorf("the RayJob was deleted while its token Secret was gone")
			}
			if got := f.secretToken(t, req.ID); got != token {
				t.Errorf("token Secret holds another token than the step's")
			}
			said := false
			for _, n := range f.allNotes() {
				said = said || strings.Contains(n, "token Secret "+testNS+"/"+name+" was deleted while the step ran")
				if strings.Contains(n, token) {
					t.Errorf("a note shows the token: %q", n)
				}
			}
			if said != deleted {
				t.Errorf("step said the Secret was made again: %v, want %v (notes %q)", said, deleted, f.allNotes())
			}
		})
	}
}

// TestTeardownRestoresSecretKubeRayWaitsFor: after the foreground delete,
// a RayJob the garbage collector let go of too early (its token Secret
// deleted, foregroundDeletion dropped, its pods still there) is held by
// KubeRay for good; teardown sees that, makes the Secret again with the
// step's token, says why, and returns once KubeRay lets the RayJob go.
func TestTeardownRestoresSecretKubeRayWaitsFor(t *testing.T) {
	t.Parallel()
	f := tokenFakes(t, "")
	req := request(0)
	c := f.provision(t, req)
	token := f.secretToken(t, req.ID)
	f.initializing(t, c)
	f.addPod(t, c, c.name+"-abcde-head-x", "head", corev1.PodStatus{Phase: corev1.PodRunning})
	await(t, c, "pod seen", func(v view) bool { return len(v.pods) == 1 })
	name := AuthSecretName(req.ID)
	jobs := rayv1.SchemeGroupVersion.WithResource("rayjobs")
	f.ray.PrependReactor("delete", "rayjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		// What a collector that has not seen the RayCluster does.
		if err := f.kube.CoreV1().Secrets(testNS).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			return true, nil, err
		}
		job, err := f.ray.Tracker().Get(jobs, testNS, c.name)
		if err != nil {
			return true, nil, err
		}
		j := job.(*rayv1.RayJob).DeepCopy()
		j.DeletionTimestamp = ptr(metav1.Now())
		j.Finalizers = []string{kuberayJobFinalizer}
		return true, nil, f.ray.Tracker().Update(jobs, j, testNS)
	})
	done := make(chan error, 1)
	go func() { done <- c.Teardown(t.Context(), false) }()
	f.awaitNote(t, "token Secret "+testNS+"/"+name+" is gone while KubeRay holds the deleted RayJob "+c.Name())
	if got := f.secretToken(t, req.ID); got != token {
		t.Errorf("the Secret made again holds another token than the step's")
	}
	// KubeRay, with its Secret back, lets the RayJob go; the collector
	// then deletes the orphaned pods.
	if err := f.ray.Tracker().Delete(jobs, testNS, c.name); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.CoreV1().Pods(testNS).Delete(t.Context(), c.name+"-abcde-head-x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Teardown: %v", err)
	}
}
