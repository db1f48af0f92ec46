package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner/local"
)

// localUpTeardownTimeout bounds stopping a local cluster up started and
// then gave up on (its post-ready work failed).
const localUpTeardownTimeout = time.Minute

// upLocal is up on the local backend: a detached private head on this
// machine (local.Clusters.Up), named, owned and expiring as a KubeRay
// interactive cluster is. Every flag is checked before anything starts;
// the flags that shape Kubernetes pods have no meaning for one head on
// this machine and are refused (exit 2) rather than silently dropped, so
// nobody believes they got a GPU type or workers they did not get.
func (a *app) upLocal(cmd *cobra.Command, o upOptions) error {
	if err := checkLocalUpFlags(cmd); err != nil {
		return err
	}
	if err := privateHeadSupported(); err != nil {
		return err
	}
	cpus, err := localCPUs(cmd, o)
	if err != nil {
		return err
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
	c, err := a.localClusters()
	if err != nil {
		return err
	}
	c.Head.NumCPUs = cpus
	if c.Head.RayBin, err = rayhead.FindRay(c.Head.RayBin); err != nil {
		return fmt.Errorf("up: %w", err) // before anything is recorded
	}
	if o.file != "" {
		fmt.Fprintf(a.stderr, "note: the cluster section of %s is not used on the local backend: "+
			"the cluster is one private ray head on this machine\n", o.file)
	}
	name, owner := spec.Metadata.Name, spec.Metadata.Owner
	if err := a.announceLocalUp(c, name, owner, ttl); err != nil {
		return err
	}
	ctx := cmd.Context()
	in, started, err := c.Up(ctx, local.UpOptions{Name: name, Owner: owner, TTL: ttl})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if !started {
		fmt.Fprintf(a.stderr, "Local cluster %s was running: expiry moved to %s, the rest of it left as it is\n",
			in.Name, in.Expires.Format(time.RFC3339))
	}
	if err := a.localUpReady(ctx, in); err != nil {
		if started {
			return a.undoLocalUp(ctx, c, in, err)
		}
		return err
	}
	a.printLocalUp(in, ttl)
	if !o.notebook {
		return nil
	}
	return a.upNotebookLocal(ctx, in, profile)
}

// announceLocalUp says on stderr what up is about to do with the cluster
// name, and refuses (exit 2) to extend a live cluster of another owner.
func (a *app) announceLocalUp(c *local.Clusters, name, owner string, ttl time.Duration) error {
	cur, err := c.Get(name)
	if err == nil && cur.Status == local.StatusRunning {
		if cur.Owner != owner {
			return &usageError{fmt.Errorf("up: local cluster %s belongs to %s, not %s: pick another --name", name, cur.Owner, owner)}
		}
		fmt.Fprintf(a.stderr, "Local cluster %s runs: moving its expiry to %s from now\n", name, ttl)
		return nil
	}
	fmt.Fprintf(a.stderr, "Local cluster %s: starting a private ray head on this machine (owner %s, ttl %s)\n", name, owner, ttl)
	return nil
}

// localUpReady is what up does with a local cluster once it runs and is
// recorded, before it tells the user about it: the one place for work
// that needs the running head (such as starting a notebook beside it). An
// error stops a cluster this up started. Today there is no such work.
func (a *app) localUpReady(context.Context, local.Interactive) error { return nil }

// undoLocalUp stops the cluster up started and gave up on, within
// localUpTeardownTimeout (a second signal stops waiting), and returns
// cause with the stop's error, if any.
func (a *app) undoLocalUp(ctx context.Context, c *local.Clusters, in local.Interactive, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), localUpTeardownTimeout)
	defer cancel()
	go func() {
		select {
		case <-abortOf(ctx):
			cancel()
		case <-dctx.Done():
		}
	}()
	if err := c.Down(dctx, in.Name); err != nil {
		return errors.Join(cause, fmt.Errorf("stop the local cluster up started: %w", err))
	}
	fmt.Fprintf(a.stderr, "Local cluster %s stopped\n", in.Name)
	return cause
}

// checkLocalUpFlags refuses the flags that only shape Kubernetes pods.
func checkLocalUpFlags(cmd *cobra.Command) error {
	for _, name := range []string{"gpu", "workers", "memory", "namespace"} {
		if cmd.Flags().Changed(name) {
			return &usageError{fmt.Errorf("up: --%s has no meaning on the local backend, whose cluster is one "+
				"private ray head on this machine: drop it, or use --backend kuberay", name)}
		}
	}
	return nil
}

// localCPUs is --cpus as the head's logical CPU count (ray start
// --num-cpus); 0, Ray's own count of this machine's CPUs, without it.
func localCPUs(cmd *cobra.Command, o upOptions) (int, error) {
	if !cmd.Flags().Changed("cpus") {
		return 0, nil
	}
	n, err := strconv.Atoi(o.cpus)
	if err != nil || n < 1 {
		return 0, &usageError{fmt.Errorf("up: --cpus %q: on the local backend, the head's logical CPU count: want a whole number of at least 1", o.cpus)}
	}
	return n, nil
}

// localClusters returns the local backend's interactive clusters, in the
// state dir of $XDG_STATE_HOME or $HOME, started with raystep's ray.
func (a *app) localClusters() (*local.Clusters, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return nil, err
	}
	bin, err := a.rayBin()
	if err != nil {
		return nil, err
	}
	log := a.log.Named("local")
	if a.cfg.LogLevel != "debug" { // up says itself when the head starts and is ready
		log = log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	return &local.Clusters{Dir: dir, Head: rayhead.Options{RayBin: bin, Logger: log}}, nil
}

// localStateDir is where local interactive clusters are recorded.
func (a *app) localStateDir() (string, error) {
	return local.StateDir(func(k string) string {
		switch k {
		case "XDG_STATE_HOME":
			return a.cfg.StateHome
		case "HOME":
			return a.cfg.Home
		}
		return ""
	})
}

// keepDir is where this machine keeps the tokens of the KubeRay clusters
// up made (kuberay.Interactive.KeepDir): beside the local clusters'
// records; "" (keep none) when there is no state dir.
func (a *app) keepDir() string {
	dir, err := a.localStateDir()
	if err != nil {
		return ""
	}
	return filepath.Join(filepath.Dir(dir), "kuberay")
}

// printLocalUp tells the user the running cluster's name, dashboard and
// how to use it, on stdout.
func (a *app) printLocalUp(in local.Interactive, ttl time.Duration) {
	w := a.stdout
	fmt.Fprintf(w, "Local cluster %s is ready; it expires %s (in %s).\n", in.Name, in.Expires.Format(time.RFC3339), ttl)
	fmt.Fprintf(w, "Dashboard: %s (token in %s)\n", in.DashboardURL, in.TokenFile)
	fmt.Fprintf(w, "Use it:\n  raystep run --cluster %s -f step.yaml\n", in.Name)
	fmt.Fprintf(w, "  or, for ray.init() and Ray's own tools on this machine:\n    export %s\n", strings.Join(in.Env(), " "))
	fmt.Fprintf(w, "Stop it: raystep down %s (it stops itself at its expiry; raystep up --name %s --ttl DUR moves that)\n",
		in.Name, in.Name)
}
