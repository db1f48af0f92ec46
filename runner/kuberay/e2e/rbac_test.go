package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
)

// applyRBAC creates examples/k8s/rbac.yaml's objects in ns instead of
// ml-ads; withRole false leaves the Role and RoleBinding out.
func applyRBAC(t *testing.T, ns string, withRole bool) {
	t.Helper()
	data, err := os.ReadFile("../../../examples/k8s/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) == 0 || !withRole && obj.GetKind() != "ServiceAccount" {
			continue
		}
		obj.SetNamespace(ns)
		if subjects, ok := obj.Object["subjects"].([]any); ok {
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
		}
		if err := shared.k8s.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// asServiceAccount is the admin config impersonating ns/raystep.
func asServiceAccount(ns string) *rest.Config {
	cfg := rest.CopyConfig(shared.k8s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":raystep"}
	return cfg
}

// TestRBAC: a whole step succeeds as the example ServiceAccount with only
// the example Role; without the Role it fails at once, naming the
// permission it lacks.
func TestRBAC(t *testing.T) {
	setup(t)
	t.Run("with the Role", func(t *testing.T) {
		ns := namespace(t, "e2e-rbac")
		applyRBAC(t, ns, true)
		b := backend(t, spec(t), ns, asServiceAccount(ns), nil)
		var mu sync.Mutex
		var warnings []string
		b.Notify = func(level, msg string) {
			t.Logf("backend %s: %s", level, msg)
			if level == "WARNING" && (strings.Contains(msg, "forbidden") || strings.Contains(msg, "Lease")) {
				mu.Lock()
				warnings = append(warnings, msg)
				mu.Unlock()
			}
		}
		if _, err := newRunner(t, b).Run(t.Context(), step(b.Spec, runID(t))); err != nil {
			t.Fatalf("step as %s/raystep: %v", ns, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(warnings) > 0 {
			t.Errorf("the step as %s/raystep lacks a permission: %q", ns, warnings)
		}
		// gc, as the same account, reads the heartbeat Leases.
		c, err := kuberay.NewClients(asServiceAccount(ns), kuberay.ConnectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kuberay.ListLeases(t.Context(), c.Kube, ns); err != nil {
			t.Errorf("gc as %s/raystep: %v", ns, err)
		}
		nothingLeft(t, ns)
	})
	t.Run("without the Role", func(t *testing.T) {
		ns := namespace(t, "e2e-norbac")
		applyRBAC(t, ns, false)
		b := backend(t, spec(t), ns, asServiceAccount(ns), nil)
		_, err := newRunner(t, b).Run(t.Context(), step(b.Spec, runID(t)))
		want := `cannot create resource "rayjobs" in API group "ray.io" in the namespace "` + ns + `"`
		if !errors.Is(err, runner.ErrInfrastructure) || err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("step error = %v, want an infrastructure failure saying %q", err, want)
		}
		nothingLeft(t, ns)
	})
}
