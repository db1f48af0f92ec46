package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/spf13/cobra"

	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

// upTeardownTimeout bounds deleting a cluster up created and then gave
// up on (not ready, or cancelled).
const upTeardownTimeout = 2 * time.Minute

// upOptions are up's flags.
type upOptions struct {
	file, backend, namespace string
	gpu, memory, cpus        string
	workers                  int32
	name, owner              string
	ttl                      time.Duration
	notebook                 bool
	set                      []string
	now                      func() time.Time
	// local: up runs on the local backend, where no flag shapes workers.
	local bool
}

func (a *app) upCommand() *cobra.Command {
	o := upOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "up [-f SPEC] [--gpu TYPE] [--workers N] [--cpus N] [--memory Q] [--name NAME] [--owner WHO] [--ttl DUR] [--notebook]",
		Short: "Bring up an interactive Ray cluster for a person, until it expires",
		Long: `up makes a long-lived Ray cluster for a person, named, owned and expiring,
that steps can borrow (` + "`raystep run --cluster NAME`" + `) and that ` + "`raystep ls`" + ` lists.

On the local backend (the default) the cluster is a private Ray head on
this machine, started as a step's head is (127.0.0.1 only, a token of its
own) and then left to a supervisor of its own that outlives raystep and
stops the head, with every process of it, at its expiry, whether or not
any raystep command runs again. up returns once the head's dashboard
answers and prints its name, its dashboard, ` + "`raystep run --cluster NAME`" + `
and the environment (RAY_ADDRESS, token auth from the head's token file)
for ray.init() and Ray's own tools. --cpus N is the head's logical CPU
count; --gpu, --workers, --memory and --namespace shape Kubernetes pods
and are refused (exit 2). A -f SPEC gives the name and owner; its cluster
section is not used. Records live in $XDG_STATE_HOME/raystep/clusters
(else ~/.local/state/raystep/clusters).

On the KubeRay backend (--backend kuberay, or RAYSTEP_BACKEND=kuberay) it
is a KubeRay RayCluster, from flags alone or from the cluster section of
-f SPEC (flags win), with everything else from the platform profile
exactly as for a step: node selectors, tolerations, GPU resource names,
service account, allowed images, pod security and labels. It waits by
watch until every pod runs, failing at once (exit 3, the cluster deleted)
when a pod is Unschedulable, cannot pull its image or is refused by Pod
Security, then prints the cluster's name, its dashboard and how to use
it. --gpu, --workers, --cpus and --memory shape the first worker group
(made when there is none: 1 worker of 4 CPUs and 16Gi); without any of
them and without -f the cluster is a head alone.

On both, every flag is checked before anything starts (exit 2, nothing
made). The name is --name, else the spec's metadata.name, else
ray-OWNER; the owner is --owner, else the spec's, else $USER, else the
OS's name for the user. The cluster expires after --ttl (the profile's spec.interactive.ttl.default,
8h unless it says otherwise, and at most its max, 24h unless it says
otherwise); ` + "`raystep down NAME`" + ` stops it at any time and ` + "`raystep gc`" + `
clears away expired ones. up on the name of a live cluster moves its
expiry to --ttl from now instead of making a second one. Ctrl-C or
SIGTERM before up is done leaves nothing running. With --notebook up then
starts a Jupyter server on the head (see raystep notebook).`,
		Example: "  raystep up --name alice-dev --ttl 4h\n" +
			"  raystep run --cluster alice-dev -f examples/ads_ranking/train.yaml\n" +
			"  raystep up --backend kuberay --gpu a100-80gb --workers 2 --name alice-dev --ttl 4h\n" +
			"  raystep up --backend kuberay -f examples/ads_ranking/train.yaml --workers 1",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.up(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "job spec whose cluster section to start from")
	f.StringVar(&o.backend, "backend", "", "local or kuberay (default $RAYSTEP_BACKEND, else local)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace (default $RAYSTEP_NAMESPACE, the spec's, the profile's; KubeRay only)")
	f.StringVar(&o.gpu, "gpu", "", "GPU type of the workers, a gpuTypes key of the profile (KubeRay only)")
	f.Int32Var(&o.workers, "workers", 1, "number of workers (KubeRay only)")
	f.StringVar(&o.cpus, "cpus", "", "CPUs of each worker, e.g. 8 (local: the head's logical CPUs)")
	f.StringVar(&o.memory, "memory", "", "memory of each worker, e.g. 32Gi (KubeRay only)")
	f.StringVar(&o.name, "name", "", "cluster name, a DNS-1035 label of at most 40 characters")
	f.StringVar(&o.owner, "owner", "", "owner of the cluster (default the spec's, else $USER, else your login name)")
	f.DurationVar(&o.ttl, "ttl", 0, "life of the cluster from now, e.g. 4h (default the profile's)")
	f.StringArrayVar(&o.set, "set", nil, "override a spec value, e.g. spec.cluster.image=... (repeatable)")
	f.BoolVar(&o.notebook, "notebook", false, "also start a Jupyter server on the head (the profile's spec.interactive.notebook); raystep notebook NAME reaches it")
	return cmd
}

// up checks everything it can before creating anything, then creates (or
// extends) the cluster, waits until it is ready and tells the user how to
// use it. A cluster it created and that never got ready, or whose wait a
// signal cut short, is deleted before up returns.
func (a *app) up(cmd *cobra.Command, o upOptions) error {
	switch b := firstNonEmpty(o.backend, a.cfg.Backend); b {
	case "kuberay":
	case "local":
		o.local = true
		return a.upLocal(cmd, o)
	default:
		return &usageError{fmt.Errorf("--backend %q: want local or kuberay", b)}
	}
	profile, err := a.profile(cmd)
	if err != nil {
		return err
	}
	ttl, err := upTTL(cmd, o, profile)
	if err != nil {
		return err
	}
	spec, err := a.upSpec(cmd, o, profile)
	if err != nil {
		return err
	}
	a.warn(spec.Warnings)
	clients, kc, err := a.kube("up")
	if err != nil {
		return err
	}
	ns := kuberay.ResolveNamespace(kuberay.Namespaces{Flag: o.namespace, Env: a.cfg.Namespace,
		Spec: spec.Metadata.Namespace, Profile: profile.Spec.Namespace, Kubeconfig: clients.Namespace})
	rc, err := kuberay.BuildCluster(spec, profile, ns, o.now().Add(ttl))
	if err != nil {
		return err
	}
	i := &kuberay.Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: a.keepDir(), Token: a.cfg.DashboardToken,
		UnschedulableGrace: kc.UnschedulableGrace, Notify: a.notices()}
	ctx := cmd.Context()
	upped, err := i.Up(ctx, rc)
	if upped.Created && upped.Cluster.UID != "" {
		fmt.Fprintf(a.stderr, "RayCluster %s/%s created (%s), expires %s: waiting until it is ready\n",
			ns, rc.Name, spec.Spec.Cluster.Shape(), rc.Annotations[kuberay.AnnotationExpires])
	}
	if err == nil {
		err = a.awaitUp(ctx, i, &upped, spec.Spec.Timeouts.Provision)
	}
	if err != nil {
		if upped.Created {
			return a.undoUp(ctx, i, upped.Cluster, err)
		}
		return err
	}
	if err := a.printUp(i, clients.InCluster && kc.InCluster, upped, ttl); err != nil || !o.notebook {
		return err
	}
	return a.upNotebook(ctx, a.reachedUp(i, clients, kc, upped.Cluster), profile)
}

// upTTL is --ttl, else the profile's default, checked against the
// profile's maximum.
func upTTL(cmd *cobra.Command, o upOptions, profile *schemas.Profile) (time.Duration, error) {
	def, limit := profile.Spec.Interactive.TTLs()
	if !cmd.Flags().Changed("ttl") {
		return def, nil
	}
	switch {
	case o.ttl <= 0:
		return 0, &usageError{fmt.Errorf("up: --ttl %s: must be positive", o.ttl)}
	case o.ttl > limit:
		return 0, &usageError{fmt.Errorf("up: --ttl %s: longer than %s, the maximum of profile %s (spec.interactive.ttl.max)",
			o.ttl, limit, profile.Metadata.Name)}
	}
	return o.ttl, nil
}

// awaitUp waits until the cluster is ready, at most timeouts.provision,
// and keeps the ready RayCluster in upped.
func (a *app) awaitUp(ctx context.Context, i *kuberay.Interactive, upped *kuberay.Upped, timeout time.Duration) error {
	if !upped.Created {
		fmt.Fprintf(a.stderr, "RayCluster %s/%s exists: expiry moved from %s to %s, the rest of it left as it is\n", upped.Cluster.Namespace,
			upped.Cluster.Name, upped.Previous, upped.Cluster.Annotations[kuberay.AnnotationExpires])
	}
	late := fmt.Errorf("RayCluster %s/%s: not ready within timeouts.provision (%s)", upped.Cluster.Namespace, upped.Cluster.Name, timeout)
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, late)
	defer cancel()
	rc, err := i.AwaitReady(wctx, upped.Cluster)
	if err != nil {
		return err
	}
	upped.Cluster = rc
	return nil
}

// undoUp deletes the cluster up created and gave up on, within
// upTeardownTimeout (a second signal stops waiting), and returns cause
// with the delete's error, if any.
func (a *app) undoUp(ctx context.Context, i *kuberay.Interactive, rc *rayv1.RayCluster, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), upTeardownTimeout)
	defer cancel()
	go func() {
		select {
		case <-abortOf(ctx):
			cancel()
		case <-dctx.Done():
		}
	}()
	if err := i.Delete(dctx, rc.Namespace, rc.Name, rc.UID); err != nil {
		return errors.Join(cause, fmt.Errorf("delete the RayCluster up created: %w", err))
	}
	fmt.Fprintf(a.stderr, "RayCluster %s/%s deleted\n", rc.Namespace, rc.Name)
	return cause
}

// notices prints what the watches report on stderr, one line each, from
// any goroutine.
func (a *app) notices() kuberay.Notify {
	var mu sync.Mutex
	return func(level, msg string) {
		mu.Lock()
		defer mu.Unlock()
		if level == "WARNING" {
			msg = "warning: " + msg
		}
		fmt.Fprintln(a.stderr, msg)
	}
}

// printUp tells the user the ready cluster's name, dashboard and how to
// use it, on stdout.
func (a *app) printUp(i *kuberay.Interactive, inCluster bool, upped kuberay.Upped, ttl time.Duration) error {
	rc := upped.Cluster
	w := a.stdout
	url := a.cfg.DashboardURL
	if url == "" {
		url = kuberay.ClusterDashboardURL(rc)
	}
	fmt.Fprintf(w, "RayCluster %s/%s is ready; it expires %s (in %s).\n", rc.Namespace, rc.Name, rc.Annotations[kuberay.AnnotationExpires], ttl)
	fmt.Fprintf(w, "Dashboard: %s\n", url)
	if a.cfg.DashboardURL == "" && !inCluster {
		fmt.Fprintf(w, "  from outside the cluster: kubectl port-forward -n %s svc/%s %d:%d, then http://127.0.0.1:%d\n",
			rc.Namespace, headService(rc), 8265, 8265, 8265)
	}
	fmt.Fprintf(w, "Use it:\n  RAY_ADDRESS=%s ray job submit --working-dir . -- python train.py\n", url)
	if export := rayTokenExport(i, rc); export != "" {
		fmt.Fprintf(w, "  with the cluster's Ray token (Secret %s/%s):\n    %s\n", rc.Namespace, upped.Secret, export)
	}
	printRunHint(w, rc)
	fmt.Fprintf(w, "Delete it: raystep down %s -n %s (raystep gc deletes it once it expired)\n", rc.Name, rc.Namespace)
	return nil
}

// printRunHint says how to run a step on the cluster.
func printRunHint(w io.Writer, rc *rayv1.RayCluster) {
	fmt.Fprintf(w, "  raystep run --backend kuberay --namespace %s --cluster %s -f step.yaml\n", rc.Namespace, rc.Name)
}

// headService names the head service of rc.
func headService(rc *rayv1.RayCluster) string {
	if s := rc.Status.Head.ServiceName; s != "" {
		return s
	}
	return rc.Name + "-head-svc"
}
