package kuberay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/raystep/raystep/runner"
)

const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: one
  cluster: {server: "https://one.example:6443"}
- name: two
  cluster: {server: "https://two.example:6443"}
users:
- name: u
  user: {token: secret}
contexts:
- name: a
  context: {cluster: one, user: u}
- name: b
  context: {cluster: two, user: u, namespace: team-b}
`

func TestConnectFollowsKubeconfig(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(file, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		context, host, namespace string
	}{
		{"", "https://one.example:6443", "default"},
		{"b", "https://two.example:6443", "team-b"},
	}
	for _, tt := range tests {
		c, err := Connect(ConnectOptions{Kubeconfig: file, Context: tt.context, UserAgent: "raystep/test"})
		if err != nil {
			t.Fatal(err)
		}
		if c.InCluster {
			t.Errorf("context %q: a kubeconfig's clients say they are the pod's service account", tt.context)
		}
		got := []string{c.Config.Host, c.Namespace, c.Config.UserAgent}
		if diff := cmp.Diff([]string{tt.host, tt.namespace, "raystep/test"}, got); diff != "" {
			t.Errorf("context %q: host, namespace, user agent (-want +got):\n%s", tt.context, diff)
		}
	}
	if _, err := Connect(ConnectOptions{Kubeconfig: file, Context: "nope"}); err == nil {
		t.Errorf("an unknown context connected")
	}
}

// TestKubeconfigNamespace: the context's namespace, read from the files
// alone (the servers here answer nothing); client-go's default for a
// context without one; "" without a kubeconfig; Connect's error for an
// unknown context or a file that is no kubeconfig.
func TestKubeconfigNamespace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, broken := filepath.Join(dir, "config"), filepath.Join(dir, "broken")
	if err := os.WriteFile(file, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(broken, []byte("garbage: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range []ConnectOptions{
		{Kubeconfig: file, Context: "b"},
		{KubeconfigEnv: file, Context: "b"},
		{Home: dir}, // Home's kubeconfig is .kube/config under it: none here
		{Kubeconfig: file},
		{Kubeconfig: file, Context: "nope"},
		{Kubeconfig: broken},
	} {
		ns, err := KubeconfigNamespace(o)
		if err != nil {
			ns = "error: " + err.Error()
		}
		got = append(got, ns)
	}
	want := []string{"team-b", "team-b", "", "default", `error: load kubeconfig: context "nope" does not exist`,
		"error: load kubeconfig: error loading config file \"" + broken + "\": yaml: line 1: did not find expected node content"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("namespace by --kubeconfig, $KUBECONFIG, $HOME, the current context, an unknown one, a broken file (-want +got):\n%s", diff)
	}
}

func TestResolveNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Namespaces
		want string
	}{
		{"flag", Namespaces{Flag: "flag", Spec: "spec", Kubeconfig: "kube"}, "flag"},
		{"spec", Namespaces{Spec: "spec", Kubeconfig: "kube"}, "spec"},
		{"kubeconfig", Namespaces{Kubeconfig: "kube"}, "kube"},
		{"none", Namespaces{}, "default"},
		{"flag over everything", Namespaces{"flag", "env", "spec", "profile", "kube"}, "flag"},
		{"env over the spec", Namespaces{Env: "env", Spec: "spec", Profile: "profile", Kubeconfig: "kube"}, "env"},
		{"spec over the profile", Namespaces{Spec: "spec", Profile: "profile", Kubeconfig: "kube"}, "spec"},
		{"profile over the kubeconfig", Namespaces{Profile: "profile", Kubeconfig: "kube"}, "profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveNamespace(tt.in); got != tt.want {
				t.Errorf("ResolveNamespace(%+v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestWarningsOnce(t *testing.T) {
	t.Parallel()
	var got []string
	w := &warnOnce{warn: func(m string) { got = append(got, m) }, seen: map[string]bool{}}
	for _, m := range []string{"spec.foo is deprecated", "spec.foo is deprecated", "other"} {
		w.HandleWarningHeaderWithContext(t.Context(), 299, "-", m)
	}
	want := []string{"API server: spec.foo is deprecated", "API server: other"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestWarningsBecomeStepEvents: once a step provisions on the clients, the
// API server's warnings (a Pod Security "would violate", say) are the
// step's warning events, once each; before that they went to Warn.
func TestWarningsBecomeStepEvents(t *testing.T) {
	t.Parallel()
	var early []string
	c, err := NewClients(&rest.Config{Host: "https://127.0.0.1:1"}, ConnectOptions{Warn: func(m string) { early = append(early, m) }})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Config.WarningHandlerWithContext.(*warnOnce)
	w.HandleWarningHeaderWithContext(t.Context(), 299, "-", "before the step")
	var got []runner.Event
	b := &Backend{Config: c.Config}
	b.forStep(runner.SinkFunc(func(e runner.Event) { got = append(got, e) }))
	for _, m := range []string{`would violate PodSecurity "restricted:latest"`, `would violate PodSecurity "restricted:latest"`} {
		w.HandleWarningHeaderWithContext(t.Context(), 299, "-", m)
	}
	if diff := cmp.Diff([]string{"API server: before the step"}, early); diff != "" {
		t.Errorf("warnings before the step (-want +got):\n%s", diff)
	}
	want := []runner.Event{{Kind: runner.KindWarning, Message: `API server: would violate PodSecurity "restricted:latest"`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the step's events (-want +got):\n%s", diff)
	}
}
