package ui

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
	"github.com/raystep/raystep/test/cluster"
)

const uiManifest = "../../../examples/k8s/ui.yaml"

// manifest reads examples/k8s/ui.yaml's objects by kind.
func manifest(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(uiManifest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", uiManifest, err)
		}
		out[u.GetKind()] = u
	}
	return out
}

// TestUIManifestRole runs the UI's watches as the ServiceAccount of
// examples/k8s/ui.yaml (impersonated, its Role and RoleBinding applied to
// the real API server): it lists the namespace's raystep clusters; and
// with any one verb taken out of the Role the UI fails at once, naming
// the verb and the resource.
func TestUIManifestRole(t *testing.T) {
	objs := manifest(t)
	dep := objs["Deployment"]
	pod, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	if pod["serviceAccountName"] != "raystep-ui" {
		t.Errorf("the Deployment runs as %v, want raystep-ui", pod["serviceAccountName"])
	}
	c := sharedCluster(t)
	ctx := t.Context()
	const ns = "ml-ads-role"
	grantUI(t, c, objs, ns)
	admin, err := rayclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RayV1().RayJobs(ns).Create(ctx, stepJob(ns, "ads-train-rbac"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":raystep-ui"}
	kube := kubeapitest.New(t, cfg)
	ray := kube

	watchCtx, cancel := context.WithCancel(ctx)
	store := &Store{}
	err = store.Watch(watchCtx, kube, ray, ns)
	if err == nil {
		err = (&Pods{}).Watch(watchCtx, kube, ns)
	}
	cancel()
	if err != nil {
		t.Fatalf("the UI under ui.yaml's Role: %v", err)
	}
	if recs := store.Records(); len(recs) != 1 || recs[0].Name != "ads-train-rbac" {
		t.Errorf("the UI under ui.yaml's Role lists %d records, want the one RayJob", len(recs))
	}

	role := objs["Role"]
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for i, rule := range rules {
		r := rule.(map[string]any)
		for _, res := range r["resources"].([]any) {
			for _, verb := range []string{"list", "watch"} {
				if !slices.Contains(r["verbs"].([]any), any(verb)) {
					continue // the secrets rule: TestUIReachesDashboardsByClusterDNS
				}
				t.Run(verb+" "+res.(string), func(t *testing.T) {
					applyRules(t, c, role, withoutVerb(rules, i, res.(string), verb))
					defer applyRules(t, c, role, rules)
					err := awaitRefused(t, kube, ray, ns)
					t.Logf("refused: %v", err)
					if msg := err.Error(); !strings.Contains(msg, verb+" "+res.(string)) || !strings.Contains(msg, "forbidden") {
						t.Errorf("error = %q, want it to name %q and say forbidden", msg, verb+" "+res.(string))
					}
				})
			}
		}
	}
}

// TestUIReachesDashboardsByClusterDNS: in a pod (InCluster), the UI
// reaches a token-auth cluster's dashboard by its head service's cluster
// DNS name, which the real KubeRay operator publishes, with the token from
// the Secret raystep made for it, as the ServiceAccount of
// examples/k8s/ui.yaml (token auth is on by default, so its Role reads
// Secrets); without that rule it says what it lacks.
func TestUIReachesDashboardsByClusterDNS(t *testing.T) {
	objs := manifest(t)
	c := sharedCluster(t)
	ctx := t.Context()
	const ns = "ml-ads-dns"
	grantUI(t, c, objs, ns)
	admin := rayclient.NewForConfigOrDie(c.Config)
	rc := notebookCluster(ns, "dev")
	rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, SecretName: ptr("dev-ray-auth")}
	rc.Spec.RayVersion = "2.60.0"
	rc, err := admin.RayV1().RayClusters(ns).Create(ctx, rc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const token = "ray-token-of-dev-7d1e"
	if _, err := c.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-ray-auth", Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster", Name: rc.Name, UID: rc.UID}}},
		Data: map[string][]byte{kuberay.AuthTokenKey: []byte(token)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":raystep-ui"}
	own := kubeapitest.New(t, cfg)
	heads := &KubeHeads{Interactive: &kuberay.Interactive{Kube: own, Ray: own}, InCluster: true}
	defer heads.Close()
	rec := &Record{Record: fleet.Record{Namespace: ns, Name: rc.Name, ClusterKind: kuberay.KindInteractive}}
	// reach asks until the operator has published the head service and the
	// authorizer has seen the Role as it is now, or a minute passed.
	reach := func(done func(Head, error) bool) (Head, error) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			h, err := heads.Reach(ctx, rec)
			if done(h, err) || time.Now().After(deadline) {
				return h, err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	h, err := reach(func(_ Head, err error) bool { return err == nil })
	want := "http://dev-head-svc." + ns + ".svc.cluster.local:8265"
	if err != nil || h.URL != want || h.Token != token {
		t.Errorf("under ui.yaml's Role: Reach = %q (token %v), %v; want %s with the cluster's token", h.URL, h.Token == token, err, want)
	}

	role := objs["Role"]
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	without := slices.DeleteFunc(slices.Clone(rules), func(r any) bool {
		return slices.Contains(r.(map[string]any)["resources"].([]any), any("secrets"))
	})
	if len(without) != len(rules)-1 {
		t.Fatalf("ui.yaml's Role has %d rules on secrets, want 1", len(rules)-len(without))
	}
	applyRules(t, c, role, without)
	_, err = reach(func(_ Head, err error) bool { return err != nil && strings.Contains(err.Error(), "forbidden") })
	if err == nil || !strings.Contains(err.Error(), "secrets") || !strings.Contains(err.Error(), "dev-ray-auth") {
		t.Errorf("without the secrets rule: %v, want a refusal naming the Secret", err)
	}
}

// grantUI creates namespace ns and, in it, ui.yaml's ServiceAccount, Role,
// RoleBinding and NetworkPolicy (objs): the API server checks them.
func grantUI(t *testing.T, c *cluster.Cluster, objs map[string]*unstructured.Unstructured, ns string) {
	t.Helper()
	// Into ns, as `kubectl apply -n NS` would: the tests share one
	// cluster, each in a namespace of its own.
	for _, o := range objs {
		o.SetNamespace(ns)
	}
	subjects, _, _ := unstructured.NestedSlice(objs["RoleBinding"].Object, "subjects")
	for _, s := range subjects {
		s.(map[string]any)["namespace"] = ns
	}
	if err := unstructured.SetNestedSlice(objs["RoleBinding"].Object, subjects, "subjects"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "NetworkPolicy"} {
		if err := c.Client.Create(t.Context(), objs[kind].DeepCopy()); err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
	}
}

// withoutVerb returns rules with verb on resource (of rules[i]) taken out.
func withoutVerb(rules []any, i int, resource, verb string) []any {
	out := []any{}
	for j, rule := range rules {
		r := rule.(map[string]any)
		if j != i {
			out = append(out, r)
			continue
		}
		for _, res := range r["resources"].([]any) {
			verbs := []any{}
			for _, v := range r["verbs"].([]any) {
				if res != resource || v != verb {
					verbs = append(verbs, v)
				}
			}
			if len(verbs) > 0 {
				out = append(out, map[string]any{"apiGroups": r["apiGroups"], "resources": []any{res}, "verbs": verbs})
			}
		}
	}
	return out
}

// applyRules updates the Role to rules.
func applyRules(t *testing.T, c *cluster.Cluster, role *unstructured.Unstructured, rules []any) {
	t.Helper()
	cur := role.DeepCopy()
	if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(role), cur); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(cur.Object, rules, "rules"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

// awaitRefused starts the UI's watches until they are refused (the API
// server's authorizer sees a Role change a moment after it is stored)
// and returns the error; it fails the test if they never are.
func awaitRefused(t *testing.T, kube kubeapi.Interface, ray kubeapi.RayInterface, ns string) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithCancel(t.Context())
		err := preflight(ctx, append(sources(kube, ray, ns), pageSources(kube, ns)...), ns)
		cancel()
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatal("the UI still starts 30s after the Role lost the verb")
		}
		<-tick.C
	}
}
