package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/history"
)

// gcOptions are gc's flags.
type gcOptions struct {
	namespace      string
	allNamespaces  bool
	olderThan      time.Duration
	heartbeatGrace time.Duration
	dryRun         bool
	keepHistory    time.Duration
	now            func() time.Time
}

func (a *app) gcCommand() *cobra.Command {
	o := gcOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "gc [--older-than DUR] [--heartbeat-grace DUR] [--dry-run]",
		Short: "Delete raystep RayJobs whose step is gone, and expired interactive clusters",
		Long: `gc deletes the RayJobs raystep created whose step is gone, and the
interactive clusters (raystep up) whose expiry has passed, and prints one
line per RayJob or RayCluster: what it did (or, with --dry-run, would do)
and why. An interactive cluster is deleted once its expiry (the
raystep.dev/expires-at annotation) has passed, never before.

An interactive cluster brought up with --idle or --idle-stop (raystep up)
is asked what it is doing: the Ray jobs on its head and, with a notebook,
Jupyter's activity record. Once idle for --idle, gc scales its GPU worker
groups to zero (raystep up NAME brings them back); once idle for
--idle-stop, it deletes it. A cluster gc cannot ask keeps its GPUs, and
its line says why. Run gc on a schedule for this to happen unattended
(examples/k8s/gc.yaml).

A running step renews a heartbeat Lease named after its RayJob every 15s.
gc deletes a RayJob whose heartbeat stopped longer than --heartbeat-grace
ago (never less than the Lease's leaseDurationSeconds, three renewal
intervals) because the step was SIGKILLed or its machine died, and never
one whose heartbeat is fresh. A step that ended and kept its cluster (teardown never,
or on_success after a failure) released its Lease; such RayJobs, and those
of older raystep versions without a Lease, are deleted once finished and
past their ttlAfterFinished debugging window, running past timeouts.run,
or still provisioning past timeouts.provision. Deleting a RayJob removes
its RayCluster, pods and Lease.

A RayJob already deleted that KubeRay still holds past --heartbeat-grace,
its step gone, waits for its token Secret: KubeRay needs it to let the
RayJob go while the RayCluster stands (the Secret was deleted, and the
RayJob was deleted before its RayCluster, as kubectl delete does). gc makes
the Secret again, with a fresh token owned by the RayJob, and says
"unblocked"; KubeRay then lets the RayJob go and its RayCluster and pods
follow.

gc also clears away the local backend's interactive clusters on this
machine that are expired (their supervisor stops them by itself; gc stops
one that is still stopping) or whose head died, and keeps live ones.
Without a kubeconfig, and unless RAYSTEP_BACKEND is kuberay, gc looks at
the local clusters only; with --namespace, at that namespace only.

Last, gc records in this machine's history (raystep ls --finished) the
steps whose raystep process died without recording how they ended
(SIGKILL, a machine that stopped) as reaped by gc, and removes the steps
that ended longer ago than --keep-history (default the profile's
spec.history.keep, else 30 days), and damaged records as old, one line
each, here and in the store the profile's spec.history.url names;
--dry-run leaves the history alone.`,
		Example: "  raystep gc --dry-run -A\n  raystep gc -n ml-ads --older-than 24h",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.gc(cmd, o) },
	}
	f := cmd.Flags()
	namespaceFlag(f, &o.namespace, "n", "namespace (default $RAYSTEP_NAMESPACE, the profile's, then the kubeconfig's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "collect in every namespace")
	f.DurationVar(&o.olderThan, "older-than", 0, "only RayJobs created longer ago than this, e.g. 24h")
	f.DurationVar(&o.heartbeatGrace, "heartbeat-grace", fleet.DefaultHeartbeatGrace, "delete a RayJob whose step's heartbeat stopped longer ago than this")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be deleted and kept, delete nothing")
	f.DurationVar(&o.keepHistory, "keep-history", history.DefaultKeep, "keep the history of steps that ended within this long (default the profile's spec.history.keep, else 720h)")
	return cmd
}

func (a *app) gc(cmd *cobra.Command, o gcOptions) error {
	if o.olderThan < 0 {
		return &usageError{fmt.Errorf("gc: --older-than %s: must not be negative", o.olderThan)}
	}
	if o.keepHistory <= 0 {
		return &usageError{fmt.Errorf("gc: --keep-history %s: must be positive", o.keepHistory)}
	}
	if o.heartbeatGrace <= 0 {
		return &usageError{fmt.Errorf("gc: --heartbeat-grace %s: must be positive", o.heartbeatGrace)}
	}
	scope, err := fleetScope("gc", o.namespace, o.allNamespaces)
	if err != nil {
		return err
	}
	fleets, err := a.fleets(cmd, "gc")
	if err != nil {
		return err
	}
	var ledger *clusterLedger
	if !o.dryRun {
		ledger = a.noteClusters(cmd, fleets, scope)
	}
	err = fleet.GC(cmd.Context(), fleets, scope, fleet.GCOptions{OlderThan: o.olderThan, HeartbeatGrace: o.heartbeatGrace,
		DryRun: o.dryRun, Now: o.now()}, func(line string) { fmt.Fprintln(a.stdout, line) })
	if o.dryRun {
		return err
	}
	ledger.record("deleted by raystep gc (expired, or its head died)")
	profile, perr := a.profile(cmd)
	if perr != nil {
		return errors.Join(err, perr)
	}
	keep := profile.Spec.History.KeepFor()
	if cmd.Flags().Changed("keep-history") {
		keep = o.keepHistory
	}
	return errors.Join(err, a.reapHistory(o.now()), a.trimHistory(cmd.Context(), profile.Spec.History.URL, o.now().Add(-keep), keep))
}

// trimHistory removes the history of steps that ended before cutoff, on
// this machine and in the store at url (if any).
func (a *app) trimHistory(ctx context.Context, url string, cutoff time.Time, keep time.Duration) error {
	var errs []error
	report := func(removed []string, err error) {
		for _, name := range removed {
			fmt.Fprintf(a.stdout, "history %s: removed (ended more than %s ago)\n", name, keep)
		}
		errs = append(errs, err)
	}
	if dir, err := a.historyDir(); err == nil { // no state dir: no history here
		report(dir.Trim(cutoff))
	}
	if url != "" {
		r, err := history.OpenRemote(ctx, url)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		defer r.Close()
		report(r.Trim(ctx, cutoff))
	}
	return errors.Join(errs...)
}
