package main

import (
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
	"sigs.k8s.io/yaml"

	"github.com/raystep/raystep/runner/local"
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
	namespaces string
	fast       bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dir, "dir", "", "directory for the kubeconfig, env file and logs, kept on exit (default: a new temporary directory, removed on exit)")
	fs.StringVar(&o.profile, "profile", os.Getenv("RAYSTEP_PROFILE"), "platform profile whose GPU pools become fake nodes, one per GPU type plus a CPU node (default: $RAYSTEP_PROFILE, else the built-in profile)")
	fs.StringVar(&o.nodesFile, "nodes", "", "YAML list of nodes {name, labels, taints, capacity}, instead of the profile's pools")
	fs.StringVar(&o.assets, "assets", "", "directory printed by test/k8s/build.sh (default: run it)")
	fs.StringVar(&o.rayBin, "ray", "", "ray executable (default: .venv/bin/ray above the working directory, else PATH)")
	fs.StringVar(&o.namespaces, "namespaces", "", "comma-separated namespaces to create")
	fs.BoolVar(&o.fast, "fast", false, "pods start without kwok's realistic delays")
	if err := fs.Parse(args); err != nil {
		return 2
	}
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
	rayBin, err := local.FindRay(o.rayBin)
	if err != nil {
		return fmt.Errorf("find ray: %w", err)
	}
	fmt.Fprintln(stderr, "sandbox: starting the Ray head")
	head, err := local.StartHead(ctx, local.HeadOptions{RayBin: rayBin})
	if err != nil {
		return fmt.Errorf("start ray head: %w", err)
	}
	defer func() {
		tctx, cancel := teardown(ctx)
		defer cancel()
		err = errors.Join(err, head.Stop(tctx))
	}()

	fmt.Fprintln(stderr, "sandbox: starting Kubernetes and the KubeRay operator")
	opts := cluster.Options{
		AssetsDir: o.assets, LogDir: filepath.Join(o.dir, "logs"),
		Nodes: nodes, DashboardURL: head.DashboardURL(),
		Logf: func(format string, args ...any) { fmt.Fprintf(stderr, "sandbox: "+format+"\n", args...) },
	}
	if o.fast {
		opts.KwokStages = cluster.FastStages()
	}
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
	envFile, err := writeFiles(o.dir, c, head.DashboardURL(), o.profile)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", o.dir)
	fmt.Fprintf(stderr, "sandbox: ready; run `. %s` and use kubectl or raystep --backend kuberay. Ctrl-C stops it.\n", envFile)
	<-ctx.Done()
	fmt.Fprintln(stderr, "sandbox: stopping")
	return nil
}

// teardown is the context stopping runs under: not cancelled with ctx,
// bounded on its own.
func teardown(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// writeFiles writes dir/kubeconfig and dir/env and returns the env file.
func writeFiles(dir string, c *cluster.Cluster, dashboardURL, profile string) (string, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, c.KubeConfig, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	env := filepath.Join(dir, "env")
	lines := []string{
		"export KUBECONFIG=" + quote(kubeconfig),
		"export RAYSTEP_BACKEND=kuberay",
		"export RAYSTEP_DASHBOARD_URL=" + quote(dashboardURL),
	}
	if profile != "" {
		abs, err := filepath.Abs(profile)
		if err != nil {
			return "", fmt.Errorf("profile path: %w", err)
		}
		lines = append(lines, "export RAYSTEP_PROFILE="+quote(abs))
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
