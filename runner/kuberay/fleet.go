package kuberay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/raystep/raystep/fleet"
)

// Fleet is raystep's RayJobs and interactive and run-scoped RayClusters
// in a namespace (or all of them), as ls and gc see them. Without a
// kubeconfig it is not here (fleet.ErrNotHere), so that `raystep ls` on a
// laptop lists the local clusters instead of failing, unless Kubernetes
// was asked for: Required, or a namespace in the scope.
type Fleet struct {
	// Connect reaches the API server; an error wrapping ErrNoKubeconfig
	// when nothing says where one is.
	Connect func() (*Clients, error)
	// Namespace returns the namespace of a scope that names none, given
	// the kubeconfig's (ResolveNamespace).
	Namespace func(kubeconfig string) (string, error)
	// Required says Kubernetes was asked for (the backend is kuberay): no
	// kubeconfig is then an error.
	Required bool
	// Warn tells what gc did other than it should: the API server's clock
	// could not be read, so this machine's judged the heartbeats.
	Warn func(string)
	// Notify receives what the watches of a delete report.
	Notify Notify
	// Dashboard, UserAgent and KeepDir are how gc reaches an interactive
	// cluster's dashboard to judge its idleness, as people's commands do.
	Dashboard DashboardOptions
	UserAgent string
	KeepDir   string
}

var _ fleet.Fleet = (*Fleet)(nil)

// Reach reaches the API server and resolves the scope's namespace (""
// for every namespace); an error wrapping fleet.ErrNotHere when there is
// no kubeconfig and nothing asked for Kubernetes.
func (f *Fleet) Reach(scope fleet.Scope) (*Clients, string, error) {
	clients, err := f.Connect()
	if errors.Is(err, ErrNoKubeconfig) && !f.Required && scope.Namespace == "" {
		return nil, "", fmt.Errorf("%w: %w", fleet.ErrNotHere, err)
	}
	if err != nil || scope.All {
		return clients, "", err
	}
	if scope.Namespace != "" {
		return clients, scope.Namespace, nil
	}
	ns, err := f.Namespace(clients.Namespace)
	return clients, ns, err
}

// List returns the steps' RayJobs, then the interactive and run-scoped
// RayClusters.
func (f *Fleet) List(ctx context.Context, scope fleet.Scope) ([]fleet.Record, error) {
	clients, ns, err := f.Reach(scope)
	if err != nil {
		return nil, err
	}
	jobs, err := ListRayJobs(ctx, clients.Ray, ns)
	if err != nil {
		return nil, err
	}
	clusters, err := ListClusters(ctx, clients.Ray, ns)
	if err != nil {
		return nil, err
	}
	rows := make([]fleet.Record, 0, len(jobs)+len(clusters))
	for i := range jobs {
		rows = append(rows, Summarize(&jobs[i]))
	}
	for i := range clusters {
		rows = append(rows, SummarizeCluster(&clusters[i]))
	}
	return rows, nil
}

// GC judges every RayJob with its heartbeat Lease and every interactive
// and run-scoped RayCluster by the API server's clock, deletes what is
// abandoned or expired (Collect) and tells one line for each.
func (f *Fleet) GC(ctx context.Context, scope fleet.Scope, o fleet.GCOptions, line func(string)) error {
	clients, ns, err := f.Reach(scope)
	if err != nil {
		return err
	}
	jobs, err := ListRayJobs(ctx, clients.Ray, ns)
	if err != nil {
		return err
	}
	leases, err := ListLeases(ctx, clients.Kube, ns)
	if err != nil {
		return err
	}
	clusters, err := ListClusters(ctx, clients.Ray, ns)
	if err != nil {
		return err
	}
	judge := JudgeOptions{OlderThan: o.OlderThan, HeartbeatGrace: o.HeartbeatGrace}
	now := f.serverNow(ctx, clients, ns, leases, o.Now)
	cv := JudgeClusters(clusters, now, judge)
	io := o
	io.Now = now
	f.judgeIdle(ctx, clients, cv, io, line)
	verdicts := append(JudgeAll(jobs, leases, now, judge), cv...)
	return Collect(ctx, clients.Kube, clients.Ray, verdicts, o.DryRun, func(r Result) {
		if r.Action == Failed {
			return // in the error Collect returns
		}
		s := fmt.Sprintf("%s %s: %s", r.Action, r.Object(), r.Reason)
		switch {
		case r.Action == Skipped:
			s += "; not deleted: " + r.Note
		case r.Note != "":
			s += "; " + r.Note
		}
		line(s)
	})
}

// serverNow is the clock gc judges RayJobs and their heartbeats by: the
// API server's (ServerNow), in ns or the namespace of a Lease, when there
// is a Lease to judge; else, or when the server's clock cannot be read,
// this machine's (now), said through Warn.
func (f *Fleet) serverNow(ctx context.Context, clients *Clients, ns string, leases map[string]*coordinationv1.Lease, now time.Time) time.Time {
	if len(leases) == 0 {
		return now
	}
	if ns == "" {
		for _, l := range leases {
			ns = l.Namespace
			break
		}
	}
	t, err := ServerNow(ctx, clients.Kube, ns)
	if err != nil {
		if f.Warn != nil {
			f.Warn("heartbeats judged by this machine's clock: " + err.Error())
		}
		return now
	}
	return t
}

// DownRun deletes the run-scoped RayClusters of the Dagster run runID at
// once and waits for each. Only a command that asked for Kubernetes
// (Required, the backend kuberay) looks: a step makes run-scoped
// RayClusters only there.
func (f *Fleet) DownRun(ctx context.Context, scope fleet.Scope, runID string, gone func(string)) error {
	if !f.Required {
		return fleet.ErrNotHere
	}
	clients, ns, err := f.Reach(scope)
	if err != nil {
		return err
	}
	i := &Interactive{Kube: clients.Kube, Ray: clients.Ray, Notify: f.Notify}
	found, err := ListRunClusters(ctx, i, ns, runID)
	if err != nil {
		return fmt.Errorf("down --dagster-run-id %s: %w", runID, err)
	}
	errs := make([]error, len(found))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := range found {
		rc := &found[k]
		wg.Go(func() {
			if errs[k] = i.Delete(ctx, rc.Namespace, rc.Name, rc.UID); errs[k] == nil {
				mu.Lock()
				defer mu.Unlock()
				gone("RayCluster " + rc.Namespace + "/" + rc.Name + " deleted")
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// idleProbeLimit bounds asking one cluster what it is doing.
const idleProbeLimit = 30 * time.Second

// judgeIdle asks each interactive cluster with idle settings that gc
// keeps otherwise what it is doing, releases its GPU workers or marks it
// for deletion (its verdict then collects it) as its settings say, and
// keeps AnnotationIdleSince current for ls and the UI. A cluster it
// cannot ask is kept, and the line says why.
func (f *Fleet) judgeIdle(ctx context.Context, clients *Clients, verdicts []Verdict, o fleet.GCOptions, line func(string)) {
	i := &Interactive{Kube: clients.Kube, Ray: clients.Ray, KeepDir: f.KeepDir, Notify: f.Notify}
	for k := range verdicts {
		v := &verdicts[k]
		rc := v.Cluster
		if v.Collect || rc.DeletionTimestamp != nil || rc.Labels[LabelKind] != KindInteractive || IdleOf(rc) == (fleet.Idle{}) {
			continue
		}
		name := "RayCluster " + rc.Namespace + "/" + rc.Name
		pctx, cancel := context.WithTimeout(ctx, idleProbeLimit)
		a, err := i.Activity(pctx, f.Dashboard, f.UserAgent, clients, rc)
		cancel()
		if err != nil {
			line(fmt.Sprintf("kept %s: interactive, activity unknown, so its GPUs stay: %v", name, err))
			continue
		}
		iv := JudgeIdle(rc, a, o.Now)
		if !o.DryRun {
			if err := i.markIdleSince(ctx, rc, iv.Since); err != nil && f.Warn != nil {
				f.Warn(fmt.Sprintf("%s: record since when it is idle: %v", name, err))
			}
		}
		switch {
		case iv.Stop:
			v.Collect, v.Reason = true, "interactive, "+iv.Reason
		case iv.Release && o.DryRun:
			line(fmt.Sprintf("would release the GPU workers of %s: %s", name, iv.Reason))
		case iv.Release:
			n, err := i.Release(ctx, rc)
			if err != nil {
				line(fmt.Sprintf("kept %s: %v", name, err))
				continue
			}
			line(fmt.Sprintf("released %d GPU worker(s) of %s: %s; raystep up %s -n %s brings them back", n, name, iv.Reason, rc.Name, rc.Namespace))
			v.Reason += "; GPU workers released just now"
		default:
			v.Reason += "; " + iv.Reason
		}
	}
}
