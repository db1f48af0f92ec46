package e2e

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestContextNamespaceWithoutAProfile: an engineer whose rights
// (examples/k8s/people.yaml) are only in their own namespace, which their
// kubeconfig context names, runs ls and gc with neither --namespace nor
// a profile. raystep works in that namespace, as kubectl would; the
// built-in profile's namespace (default), where the API server refuses
// them, comes only after it.
func TestContextNamespaceWithoutAProfile(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-context-ns")
	t.Cleanup(func() { cleanNamespace(t, ns) })
	applyRBAC(t, peopleRole, ns, func(rules []any) []any { return rules })

	path := kubeconfigAs(t, asPerson())
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Contexts {
		c.Namespace = ns
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + t.TempDir(), "XDG_STATE_HOME=" + t.TempDir(), "KUBECONFIG=" + path}

	// The person's rights end at their namespace: default refuses them.
	if o := raystepIn(t, env, "ls", "-n", "default"); o.code != 3 || !strings.Contains(o.stderr, "forbidden") {
		t.Fatalf("ls -n default as the person: exit %d, want 3, refused by the API server:\n%s", o.code, o.stderr)
	}
	for _, args := range [][]string{{"ls", "-o", "json"}, {"gc", "--dry-run"}} {
		if o := raystepIn(t, env, args...); o.code != 0 || strings.Contains(o.stderr, "namespace default") {
			t.Errorf("%s with the context's namespace and no profile: exit %d, want 0 in %s:\n%s%s",
				strings.Join(args, " "), o.code, ns, o.stdout, o.stderr)
		}
	}
}
