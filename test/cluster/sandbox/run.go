package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/schemas"
	"github.com/raystep/raystep/test/cluster"
)

// options are the sandbox's flags.
type options struct {
	dir        string
	nodesFile  string
	profile    string
	assets     string
	rayBin     string
	dashboard  string // a running head's dashboard; empty: start one
	namespaces string
	rbac       string
	rbacSet    bool // -rbac was given: the file must exist
	fast       bool
	kueue      bool
	audit      bool
	uiAddr     string
}

// defaultRBAC is the manifest -rbac applies unless told otherwise, looked up
// from the working directory upwards.
const defaultRBAC = "examples/k8s/rbac.yaml"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dir, "dir", "", "directory for the kubeconfig, env file and logs, kept on exit (default: a new temporary directory, removed on exit)")
	fs.StringVar(&o.profile, "profile", os.Getenv("RAYSTEP_PROFILE"), "platform profile whose GPU pools become fake nodes, one per GPU type plus a CPU node (default: $RAYSTEP_PROFILE, else the built-in profile)")
	fs.StringVar(&o.nodesFile, "nodes", "", "YAML list of nodes {name, labels, taints, capacity}, instead of the profile's pools")
	fs.StringVar(&o.assets, "assets", "", "directory printed by test/k8s/build.sh (default: run it)")
	fs.StringVar(&o.rayBin, "ray", "", "ray executable (default: .venv/bin/ray above the working directory, else PATH)")
	fs.StringVar(&o.dashboard, "ray-dashboard", "", "dashboard URL (http://127.0.0.1:PORT) of a running Ray head on this machine for the operator and the pods' port 8265, instead of starting one")
	fs.StringVar(&o.namespaces, "namespaces", "", "comma-separated namespaces to create")
	fs.StringVar(&o.rbac, "rbac", defaultRBAC, "manifest of ServiceAccounts, Roles and RoleBindings applied into the profile's namespace, so Ray pods' service account exists (default: "+defaultRBAC+" above the working directory, skipped when absent; empty disables)")
	fs.BoolVar(&o.fast, "fast", false, "pods start without kwok's realistic delays")
	fs.BoolVar(&o.audit, "audit", false, "the API server writes an audit log of every request (Metadata level, one JSON event a line) to DIR/logs/audit.jsonl, named by the env file's SANDBOX_AUDIT_LOG")
	fs.BoolVar(&o.kueue, "kueue", false, "start Kueue with one LocalQueue per GPU pool in the profile's namespace (on by itself when the profile names a queue); a profile without queues is copied to DIR/profile.yaml with each GPU type queued in the LocalQueue of its name, and the env file points RAYSTEP_PROFILE at it")
	fs.StringVar(&o.uiAddr, "ui-addr", "127.0.0.1:0", "loopback address of the raystep ui page of the sandbox's clusters (port 0 picks a free one; empty: no page)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fs.Visit(func(f *flag.Flag) { o.rbacSet = o.rbacSet || f.Name == "rbac" })
	if err := sandbox(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "sandbox: %v\n", err)
		return 3
	}
	return 0
}

// sandbox starts everything, prints where it is, waits for ctx to end and
// stops everything on every path.
func sandbox(ctx context.Context, o options, stdout, stderr io.Writer) (err error) {
	profile, err := loadProfile(o.profile)
	if err != nil {
		return err
	}
	nodes, err := loadNodes(o.nodesFile, profile)
	if err != nil {
		return err
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "raystep-sandbox-"); err != nil {
			return fmt.Errorf("create sandbox dir: %w", err)
		}
		// Its kubeconfig is useless once the cluster is gone.
		defer func() { err = errors.Join(err, os.RemoveAll(o.dir)) }()
	}
	dashboard := o.dashboard
	if dashboard == "" {
		rayBin, ferr := rayhead.FindRay(o.rayBin)
		if ferr != nil {
			return fmt.Errorf("find ray: %w", ferr)
		}
		fmt.Fprintln(stderr, "sandbox: starting the Ray head")
		var head *rayhead.Head
		if head, err = rayhead.Start(ctx, rayhead.Options{RayBin: rayBin}); err != nil {
			return fmt.Errorf("start ray head: %w", err)
		}
		defer func() {
			tctx, cancel := teardown(ctx)
			defer cancel()
			err = errors.Join(err, head.Stop(tctx))
		}()
		dashboard = head.DashboardURL()
	}

	fmt.Fprintln(stderr, "sandbox: starting Kubernetes and the KubeRay operator")
	opts := cluster.Options{
		AssetsDir: o.assets, LogDir: filepath.Join(o.dir, "logs"),
		Nodes: nodes, DashboardURL: dashboard,
		Logf: func(format string, args ...any) { fmt.Fprintf(stderr, "sandbox: "+format+"\n", args...) },
	}
	if o.fast {
		opts.KwokStages = cluster.FastStages()
	}
	opts.Audit = o.audit
	opts.Kueue = o.kueue || queued(profile)
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("start cluster (logs in %s): %w", opts.LogDir, err)
	}
	defer func() {
		tctx, cancel := teardown(ctx)
		defer cancel()
		err = errors.Join(err, c.Stop(tctx))
	}()

	if err := createNamespaces(ctx, c, profile.Spec.Namespace+","+o.namespaces); err != nil {
		return err
	}
	if err := applyRBAC(ctx, c, o, profile.Spec.Namespace, stderr); err != nil {
		return err
	}
	profilePath := o.profile
	if opts.Kueue {
		if profilePath, err = setupQueues(ctx, c, profile, o, stderr); err != nil {
			return err
		}
	}
	envFile, err := writeFiles(o.dir, c, dashboard, profilePath, c.AuditLogPath)
	if err != nil {
		return err
	}
	if o.uiAddr != "" {
		url, stop, err := startUI(ctx, c, o.uiAddr, stderr)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(stderr, "sandbox: raystep ui, the live page of the sandbox's clusters: %s\n", url)
	}
	fmt.Fprintf(stdout, "%s\n", o.dir)
	fmt.Fprintf(stderr, "sandbox: ready; run `. %s` and use kubectl or raystep --backend kuberay. Ctrl-C stops it.\n", envFile)
	<-ctx.Done()
	fmt.Fprintln(stderr, "sandbox: stopping")
	return nil
}

// queued reports whether the profile names a Kueue queue.
func queued(p *schemas.Profile) bool {
	for _, g := range p.Spec.GPUTypes {
		if g.Queue != "" {
			return true
		}
	}
	return p.Spec.Queue != ""
}

// setupQueues creates one Kueue queue per GPU pool (cluster.ProfileQueues)
// in the profile's namespace and returns the profile steps should use: the
// given one when it names queues, else a copy in o.dir that queues each
// GPU type in the LocalQueue of its name.
func setupQueues(ctx context.Context, c *cluster.Cluster, profile *schemas.Profile, o options, stderr io.Writer) (string, error) {
	path := o.profile
	if !queued(profile) {
		for name, g := range profile.Spec.GPUTypes {
			g.Queue = name
			profile.Spec.GPUTypes[name] = g
		}
		data, err := yaml.Marshal(profile)
		if err != nil {
			return "", fmt.Errorf("encode queued profile: %w", err)
		}
		path = filepath.Join(o.dir, "profile.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return "", fmt.Errorf("write queued profile: %w", err)
		}
	}
	ns := profile.Spec.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	if err := c.CreateKueueObjects(ctx, cluster.ProfileQueues(profile, ns)); err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "sandbox: Kueue queues one LocalQueue per GPU pool in namespace %s; profile %s\n", ns, or(path, "(built-in)"))
	return path, nil
}

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// teardown is the context stopping runs under: not cancelled with ctx,
// bounded on its own.
func teardown(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// writeFiles writes dir/kubeconfig and dir/env and returns the env file.
// The env file sets no dashboard URL: raystep port-forwards to each head
// pod, as from a laptop, and kwok forwards the head pod's dashboard port
// to the sandbox's Ray head at dashboardURL. With an audit log it names
// it as SANDBOX_AUDIT_LOG, for scripts that count requests.
func writeFiles(dir string, c *cluster.Cluster, dashboardURL, profile, auditLog string) (string, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, c.KubeConfig, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	env := filepath.Join(dir, "env")
	lines := []string{
		"# raystep port-forwards to each head pod (kubectl port-forward works too);",
		"# every head pod's port 8265 is the sandbox's Ray head at " + dashboardURL + ".",
		"export KUBECONFIG=" + quote(kubeconfig),
		"export RAYSTEP_BACKEND=kuberay",
	}
	if profile != "" {
		abs, err := filepath.Abs(profile)
		if err != nil {
			return "", fmt.Errorf("profile path: %w", err)
		}
		lines = append(lines, "export RAYSTEP_PROFILE="+quote(abs))
	}
	if auditLog != "" {
		lines = append(lines, "export SANDBOX_AUDIT_LOG="+quote(auditLog))
	}
	if err := os.WriteFile(env, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write env file: %w", err)
	}
	return env, nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func createNamespaces(ctx context.Context, c *cluster.Cluster, list string) error {
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// loadProfile reads the platform profile, or the built-in one.
func loadProfile(path string) (*schemas.Profile, error) {
	if path == "" {
		return schemas.DefaultProfile()
	}
	return schemas.LoadProfile(path)
}

// loadNodes reads the node list, or derives it from the profile's pools.
func loadNodes(path string, profile *schemas.Profile) ([]cluster.NodeSpec, error) {
	if path == "" {
		return cluster.ProfileNodes(profile), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	var nodes []cluster.NodeSpec
	if err := yaml.UnmarshalStrict(data, &nodes); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nodes, nil
}

// applyRBAC creates the -rbac manifest's objects in namespace, pointing
// RoleBinding subjects at it too. Without the Ray pods' ServiceAccount
// KubeRay refuses to start an autoscaling cluster.
func applyRBAC(ctx context.Context, c *cluster.Cluster, o options, namespace string, stderr io.Writer) error {
	path, err := rbacFile(o)
	if path == "" || err != nil {
		if err == nil && o.rbac != "" {
			fmt.Fprintf(stderr, "sandbox: no %s above the working directory: Ray pods' service account is not created\n", o.rbac)
		}
		return err
	}
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read rbac manifest: %w", err)
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 { // a comment-only document
			continue
		}
		if err := inNamespace(obj, namespace); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s/%s from %s: %w", obj.GetKind(), namespace, obj.GetName(), path, err)
		}
	}
	fmt.Fprintf(stderr, "sandbox: applied %s in namespace %s\n", path, namespace)
	return nil
}

// inNamespace moves obj, and a RoleBinding's ServiceAccount subjects, into
// namespace.
func inNamespace(obj *unstructured.Unstructured, namespace string) error {
	obj.SetNamespace(namespace)
	if obj.GetKind() != "RoleBinding" {
		return nil
	}
	subjects, _, err := unstructured.NestedSlice(obj.Object, "subjects")
	if err != nil {
		return fmt.Errorf("rolebinding %s: %w", obj.GetName(), err)
	}
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok && m["kind"] == "ServiceAccount" {
			m["namespace"] = namespace
		}
	}
	return unstructured.SetNestedSlice(obj.Object, subjects, "subjects")
}

// rbacFile resolves -rbac: "" when disabled, or when the default manifest is
// not found from the working directory upwards; a given file must exist.
func rbacFile(o options) (string, error) {
	if o.rbac == "" {
		return "", nil
	}
	if o.rbacSet || filepath.IsAbs(o.rbac) {
		if _, err := os.Stat(o.rbac); err != nil {
			return "", fmt.Errorf("rbac manifest: %w", err)
		}
		return o.rbac, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", nil
	}
	for {
		cand := filepath.Join(dir, o.rbac)
		if fi, err := os.Stat(cand); err == nil && !fi.IsDir() {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}
