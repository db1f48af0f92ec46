package main

import (
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/raystep/raystep/fleet"
	"github.com/spf13/cobra"
)

// upOptions are up's flags.
type upOptions struct {
	file, namespace   string
	gpu, memory, cpus string
	workers           int32
	name, owner       string
	ttl               time.Duration
	idle, idleStop    string
	notebook          bool
	set               []string
}

func (a *app) upCommand() *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "up [-f SPEC] [--gpu TYPE] [--workers N] [--cpus N] [--memory Q] [--name NAME] [--owner WHO] [--ttl DUR] [--idle DUR] [--idle-stop DUR] [--notebook]",
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
starts a Jupyter server on the head (see raystep notebook).

A cluster nobody uses gives its GPUs back. It is idle while no Ray job
but its notebook's is pending or running and no notebook kernel is busy
(Jupyter's own activity record), counted from the last job's end, the
notebook's last activity or the last up of it, whichever is latest. After
--idle of that (default the profile's spec.interactive.idle, else off):
on KubeRay, ` + "`raystep gc`" + ` (which the platform runs on a schedule) scales
its GPU worker groups to zero, and ` + "`raystep up NAME`" + ` (or a step that
borrows the cluster) brings them back;
locally, the head's supervisor stops the head. After --idle-stop the
whole cluster is deleted (gc on KubeRay, the supervisor locally). Either
must be shorter than --ttl, and --idle-stop longer than --idle; off
turns either off. ` + "`raystep ls`" + ` shows since when a cluster is idle.`,
		Example: "  raystep up --name alice-dev --ttl 4h\n" +
			"  raystep run --cluster alice-dev -f examples/ads_ranking/train.yaml\n" +
			"  raystep up --backend kuberay --gpu a100-80gb --workers 2 --name alice-dev --ttl 4h --idle 30m --idle-stop 2h\n" +
			"  raystep up --backend kuberay -f examples/ads_ranking/train.yaml --workers 1",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.up(cmd, o) },
	}
	addBackendFlag(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "job spec whose cluster section to start from")
	namespaceFlag(f, &o.namespace, "n", "namespace (default $RAYSTEP_NAMESPACE, the spec's, the profile's, then the kubeconfig's; KubeRay only)")
	f.StringVar(&o.gpu, "gpu", "", "GPU type of the workers, a gpuTypes key of the profile (KubeRay only)")
	f.Int32Var(&o.workers, "workers", 1, "number of workers (KubeRay only)")
	f.StringVar(&o.cpus, "cpus", "", "CPUs of each worker, e.g. 8 (local: the head's logical CPUs)")
	f.StringVar(&o.memory, "memory", "", "memory of each worker, e.g. 32Gi (KubeRay only)")
	f.StringVar(&o.name, "name", "", "cluster name, a DNS-1035 label of at most 40 characters")
	f.StringVar(&o.owner, "owner", "", "owner of the cluster (default the spec's, else $USER, else your login name)")
	f.DurationVar(&o.ttl, "ttl", 0, "life of the cluster from now, e.g. 4h (default the profile's)")
	f.StringArrayVar(&o.set, "set", nil, "override a spec value, e.g. spec.cluster.image=... (repeatable)")
	f.StringVar(&o.idle, "idle", "", "release the cluster's GPUs after this much idleness, e.g. 30m, or off (default the profile's spec.interactive.idle)")
	f.StringVar(&o.idleStop, "idle-stop", "", "delete the cluster after this much idleness, e.g. 2h, or off (default the profile's spec.interactive.idleStop)")
	f.BoolVar(&o.notebook, "notebook", false, "also start a Jupyter server on the head (the profile's spec.interactive.notebook); raystep notebook NAME reaches it")
	return cmd
}

// up hands the flags to the backend's Keeper, which checks all of them
// before it makes anything (fleet.Keeper.Up).
func (a *app) up(cmd *cobra.Command, o upOptions) error {
	s, err := a.site(cmd, "up")
	if err != nil {
		return err
	}
	profile, err := a.profile(cmd)
	if err != nil {
		return err
	}
	return s.Up(cmd.Context(), fleet.UpRequest{
		File: o.file, Set: o.set, Name: o.name, Owner: o.owner, DefaultOwner: a.defaultOwner,
		GPU: o.gpu, CPUs: o.cpus, Memory: o.memory, Workers: o.workers, TTL: o.ttl, Notebook: o.notebook,
		Idle: o.idle, IdleStop: o.idleStop,
		Given: cmd.Flags().Changed, Profile: profile,
	})
}

// defaultOwner is the owner of a cluster up makes from flags without
// --owner: $USER, else the login name.
func (a *app) defaultOwner() (owner, from string, err error) {
	if a.cfg.User != "" {
		return a.cfg.User, "$USER " + a.cfg.User, nil
	}
	name, err := loginName()
	if err != nil {
		return "", "", &usageError{fmt.Errorf("up: --owner WHO is required: USER is unset and %v", err)}
	}
	return name, "the login name " + name + " (USER is unset)", nil
}

// loginName is the name the OS gives the user raystep runs as (a root
// shell, a container, a cron job: where USER is unset); tests replace it.
var loginName = func() (string, error) {
	u, err := user.Current()
	switch {
	case err != nil:
		return "", fmt.Errorf("user ID %d has no name here (%v)", os.Getuid(), err)
	case u.Username == "":
		return "", fmt.Errorf("user ID %d has no name here", os.Getuid())
	}
	return u.Username, nil
}
