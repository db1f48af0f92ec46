package kuberay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/raysubmit"
)

// Idle release (`raystep up --idle DUR --idle-stop DUR`): an interactive
// RayCluster carries its settings in annotations, and `raystep gc`, which
// the platform runs unattended (a CronJob, a Dagster schedule), asks each
// such cluster what it is doing: the Ray jobs on its head (the notebook's
// own job left out) and, when it has a notebook, Jupyter's own activity
// record. A cluster is idle from the latest of its creation, its last
// `up NAME`, the end of its last job and its notebook's last activity;
// nothing it remembers in between is needed, so any gc, anywhere, judges
// it the same. Once idle for --idle, gc scales its accelerator worker
// groups (those whose pods ask for a GPU or another extended resource) to
// zero and keeps what they were in AnnotationReleased; `raystep up NAME`
// puts them back. Once idle for --idle-stop, gc deletes the cluster. A
// cluster gc cannot ask (its head unreachable, its notebook's token
// unreadable) is kept: releasing GPUs under someone's running job is
// worse than holding them one gc longer.
const (
	// AnnotationIdle is how long the cluster may be idle before its
	// accelerator workers are released, as a Go duration.
	AnnotationIdle = "raystep.dev/idle"
	// AnnotationIdleStop is how long it may be idle before it is deleted.
	AnnotationIdleStop = "raystep.dev/idle-stop"
	// AnnotationActiveAt is when up last made or restored it (RFC 3339):
	// idleness counts from then at the earliest.
	AnnotationActiveAt = "raystep.dev/active-at"
	// AnnotationIdleSince is since when gc last found it idle (RFC 3339),
	// for ls and the UI; gone once gc finds it in use.
	AnnotationIdleSince = "raystep.dev/idle-since"
	// AnnotationReleased holds the worker groups gc scaled to zero, as
	// JSON, while they are released.
	AnnotationReleased = "raystep.dev/released"
)

// SetIdle writes idle's settings and the moment of now into annotations.
func SetIdle(annotations map[string]string, idle fleet.Idle, now time.Time) {
	set := func(k string, d time.Duration) {
		if d > 0 {
			annotations[k] = d.String()
		} else {
			delete(annotations, k)
		}
	}
	set(AnnotationIdle, idle.Release)
	set(AnnotationIdleStop, idle.Stop)
	annotations[AnnotationActiveAt] = now.UTC().Format(time.RFC3339)
}

// IdleOf reads the idle settings of rc; zero for what it has none of.
func IdleOf(rc *rayv1.RayCluster) fleet.Idle {
	parse := func(k string) time.Duration {
		d, err := time.ParseDuration(rc.Annotations[k])
		if err != nil || d <= 0 {
			return 0
		}
		return d
	}
	return fleet.Idle{Release: parse(AnnotationIdle), Stop: parse(AnnotationIdleStop)}
}

// IdleSince returns when gc last found rc idle since, if it did.
func IdleSince(rc *rayv1.RayCluster) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, rc.Annotations[AnnotationIdleSince])
	return t, err == nil
}

// releasedGroup is one worker group as it was before gc released it.
type releasedGroup struct {
	Group    string `json:"group"`
	Replicas int32  `json:"replicas"`
	Min      int32  `json:"minReplicas"`
}

// Released reports whether rc's accelerator workers are released.
func Released(rc *rayv1.RayCluster) bool { return rc.Annotations[AnnotationReleased] != "" }

// acceleratorGroups are the indexes of rc's worker groups whose pods ask
// for an extended resource (a GPU, a TPU): what idle release gives back.
func acceleratorGroups(rc *rayv1.RayCluster) []int {
	var out []int
	for k, g := range rc.Spec.WorkerGroupSpecs {
		if slices.ContainsFunc(g.Template.Spec.Containers, asksAccelerator) {
			out = append(out, k)
		}
	}
	return out
}

func asksAccelerator(c corev1.Container) bool {
	for _, list := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for name, q := range list {
			if strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "hugepages-") && !q.IsZero() {
				return true
			}
		}
	}
	return false
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// annotationPath is the JSON pointer of annotation key.
func annotationPath(key string) string {
	return "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// patch applies ops to rc, guarded by its uid (another RayCluster of the
// same name fails the patch) and, when groups, by each worker group's
// name at its index (a spec someone reordered meanwhile fails it too).
func (i *Interactive) patch(ctx context.Context, rc *rayv1.RayCluster, groups []int, ops ...jsonPatchOp) (*rayv1.RayCluster, error) {
	guard := []jsonPatchOp{{Op: "test", Path: "/metadata/uid", Value: string(rc.UID)}}
	for _, k := range groups {
		guard = append(guard, jsonPatchOp{Op: "test", Path: fmt.Sprintf("/spec/workerGroupSpecs/%d/groupName", k), Value: rc.Spec.WorkerGroupSpecs[k].GroupName})
	}
	if rc.Annotations == nil {
		guard = append(guard, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{}})
	}
	body, err := json.Marshal(append(guard, ops...))
	if err != nil {
		return nil, err
	}
	return i.Ray.RayV1().RayClusters(rc.Namespace).Patch(ctx, rc.Name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
}

// Release scales rc's accelerator worker groups to zero (replicas and
// minReplicas; the operator deletes their pods) and keeps what they were
// in AnnotationReleased. It returns how many workers it released.
func (i *Interactive) Release(ctx context.Context, rc *rayv1.RayCluster) (int32, error) {
	groups := acceleratorGroups(rc)
	var kept []releasedGroup
	var ops []jsonPatchOp
	var workers int32
	for _, k := range groups {
		g := rc.Spec.WorkerGroupSpecs[k]
		r := releasedGroup{Group: g.GroupName, Replicas: ptrValue(g.Replicas), Min: ptrValue(g.MinReplicas)}
		kept = append(kept, r)
		workers += r.Replicas
		p := fmt.Sprintf("/spec/workerGroupSpecs/%d/", k)
		ops = append(ops, jsonPatchOp{Op: "add", Path: p + "replicas", Value: 0}, jsonPatchOp{Op: "add", Path: p + "minReplicas", Value: 0})
	}
	if len(kept) == 0 {
		return 0, nil
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return 0, err
	}
	ops = append(ops, jsonPatchOp{Op: "add", Path: annotationPath(AnnotationReleased), Value: string(b)})
	if _, err := i.patch(ctx, rc, groups, ops...); err != nil {
		return 0, fmt.Errorf("release the GPU workers of RayCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	}
	return workers, nil
}

// Restore puts back the worker groups Release scaled to zero and marks rc
// in use now; a cluster with nothing released is only marked. It returns
// the RayCluster as patched and whether it restored anything.
func (i *Interactive) Restore(ctx context.Context, rc *rayv1.RayCluster, now time.Time) (*rayv1.RayCluster, bool, error) {
	ops := []jsonPatchOp{{Op: "add", Path: annotationPath(AnnotationActiveAt), Value: now.UTC().Format(time.RFC3339)}}
	if _, ok := rc.Annotations[AnnotationIdleSince]; ok {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: annotationPath(AnnotationIdleSince)})
	}
	var kept []releasedGroup
	if s := rc.Annotations[AnnotationReleased]; s != "" {
		if err := json.Unmarshal([]byte(s), &kept); err != nil {
			return nil, false, fmt.Errorf("RayCluster %s/%s: annotation %s is not what gc wrote (%v): set the worker groups' replicas by hand",
				rc.Namespace, rc.Name, AnnotationReleased, err)
		}
		ops = append(ops, jsonPatchOp{Op: "remove", Path: annotationPath(AnnotationReleased)})
	}
	var groups []int
	for _, r := range kept {
		k := slices.IndexFunc(rc.Spec.WorkerGroupSpecs, func(g rayv1.WorkerGroupSpec) bool { return g.GroupName == r.Group })
		if k < 0 {
			continue // a group someone removed meanwhile
		}
		groups = append(groups, k)
		p := fmt.Sprintf("/spec/workerGroupSpecs/%d/", k)
		ops = append(ops, jsonPatchOp{Op: "add", Path: p + "minReplicas", Value: r.Min}, jsonPatchOp{Op: "add", Path: p + "replicas", Value: r.Replicas})
	}
	got, err := i.patch(ctx, rc, groups, ops...)
	if err != nil {
		return nil, false, fmt.Errorf("bring back the workers of RayCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	}
	return got, len(kept) > 0, nil
}

// markIdleSince writes (since non-zero) or removes AnnotationIdleSince
// when it changes.
func (i *Interactive) markIdleSince(ctx context.Context, rc *rayv1.RayCluster, since time.Time) error {
	old, had := rc.Annotations[AnnotationIdleSince]
	var op jsonPatchOp
	switch {
	case since.IsZero() && !had:
		return nil
	case since.IsZero():
		op = jsonPatchOp{Op: "remove", Path: annotationPath(AnnotationIdleSince)}
	case old == since.UTC().Format(time.RFC3339):
		return nil
	default:
		op = jsonPatchOp{Op: "add", Path: annotationPath(AnnotationIdleSince), Value: since.UTC().Format(time.RFC3339)}
	}
	_, err := i.patch(ctx, rc, nil, op)
	return err
}

// JobActivity lists the Ray jobs of the cluster through c: one pending or
// running (other than the cluster's notebook) makes it busy, and the last
// one to end says when it was last used.
func JobActivity(ctx context.Context, c *raysubmit.Client, cluster string) (notebook.Activity, error) {
	jobs, err := c.List(ctx)
	if err != nil {
		return notebook.Activity{}, fmt.Errorf("list its Ray jobs: %w", err)
	}
	var a notebook.Activity
	for _, j := range jobs {
		if notebook.IsJob(j, cluster) {
			continue
		}
		id := j.SubmissionID
		if id == "" {
			id = j.JobID
		}
		if !j.Status.Terminal() && a.Busy == "" {
			a.Busy = fmt.Sprintf("Ray job %s is %s", id, j.Status)
		}
		if t := j.Ended(); t.After(a.Last) {
			a.Last = t
		}
	}
	return a, nil
}

// IdleVerdict is what gc does about an idle interactive cluster.
type IdleVerdict struct {
	// Release and Stop say gc releases its accelerator workers, or
	// deletes it; neither keeps it as it is.
	Release, Stop bool
	// Since is since when it is idle; zero while in use.
	Since time.Time
	// Reason says why, for people.
	Reason string
}

// JudgeIdle decides what rc's settings ask for, given what it was found
// doing (a) at now.
func JudgeIdle(rc *rayv1.RayCluster, a notebook.Activity, now time.Time) IdleVerdict {
	idle := IdleOf(rc)
	if a.Busy != "" {
		return IdleVerdict{Reason: "in use: " + a.Busy}
	}
	since := rc.CreationTimestamp.Time
	if t, err := time.Parse(time.RFC3339, rc.Annotations[AnnotationActiveAt]); err == nil && t.After(since) {
		since = t
	}
	if a.Last.After(since) {
		since = a.Last
	}
	since = since.Truncate(time.Second)
	if since.After(now) {
		since = now
	}
	idleFor := now.Sub(since).Round(time.Second)
	v := IdleVerdict{Since: since}
	switch {
	case idle.Stop > 0 && idleFor >= idle.Stop:
		v.Stop = true
		v.Reason = fmt.Sprintf("idle for %s (since %s), past --idle-stop %s", idleFor, since.UTC().Format(time.RFC3339), idle.Stop)
	case idle.Release > 0 && idleFor >= idle.Release && !Released(rc) && len(acceleratorGroups(rc)) > 0:
		v.Release = true
		v.Reason = fmt.Sprintf("idle for %s (since %s), past --idle %s", idleFor, since.UTC().Format(time.RFC3339), idle.Release)
	case Released(rc):
		v.Reason = fmt.Sprintf("idle for %s, GPU workers released (raystep up %s brings them back)", idleFor, rc.Name)
	default:
		v.Reason = fmt.Sprintf("idle for %s%s", idleFor, idleLeft(idle, idleFor, len(acceleratorGroups(rc)) > 0))
	}
	return v
}

// idleLeft says how long until idle acts, given the idleness so far and
// whether the cluster has GPU workers to release.
func idleLeft(idle fleet.Idle, so time.Duration, gpus bool) string {
	var parts []string
	switch {
	case idle.Release > 0 && gpus:
		parts = append(parts, fmt.Sprintf("GPU workers released in %s", idle.Release-so))
	case idle.Release > 0:
		parts = append(parts, "no GPU workers to release")
	}
	if idle.Stop > 0 {
		parts = append(parts, fmt.Sprintf("deleted in %s", idle.Stop-so))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

// Activity reaches rc's dashboard (and its notebook, when it has one)
// the way a person's command reaches it and returns what it is doing.
func (i *Interactive) Activity(ctx context.Context, o DashboardOptions, userAgent string, clients *Clients, rc *rayv1.RayCluster) (notebook.Activity, error) {
	c, done, err := i.dashboardClient(ctx, o, userAgent, clients, rc)
	if err != nil {
		return notebook.Activity{}, err
	}
	defer done()
	a, err := JobActivity(ctx, c, rc.Name)
	if err != nil || rc.Annotations[AnnotationNotebook] == "" {
		return a, err
	}
	nb, err := i.ReadNotebook(ctx, rc)
	if err != nil {
		return a, err
	}
	fwd, err := i.ForwardHead(ctx, clients.Config, rc, 0, uint16(nb.Port))
	if err != nil {
		return a, fmt.Errorf("reach its notebook: %w", err)
	}
	defer fwd.Close()
	na, err := notebook.ServerActivity(ctx, &http.Client{Timeout: 30 * time.Second}, fwd.URL, nb)
	if err != nil {
		return a, err
	}
	return a.Merge(na), nil
}

// dashboardClient is a Jobs API client on rc's dashboard, reached as
// people's commands reach it (the platform's URL, the head service's DNS
// name in a pod, else a port-forward), with rc's Ray token, and the
// function that closes the way to it.
func (i *Interactive) dashboardClient(ctx context.Context, o DashboardOptions, userAgent string, clients *Clients, rc *rayv1.RayCluster) (*raysubmit.Client, func(), error) {
	token := o.Token
	if token == "" {
		var err error
		if token, err = i.ReadToken(ctx, rc); err != nil {
			return nil, nil, err
		}
	}
	url, done := o.URL, func() {}
	switch {
	case url != "":
	case clients.InCluster && o.InCluster:
		url = ClusterDashboardURL(rc)
	default:
		fwd, err := i.ForwardHead(ctx, clients.Config, rc, 0, DashboardPort(rc))
		if err != nil {
			return nil, nil, err
		}
		url, done = fwd.URL, fwd.Close
	}
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url, Token: token, UserAgent: userAgent, Headers: o.Headers, CAFile: o.CAFile})
	if err != nil {
		done()
		return nil, nil, err
	}
	return c, done, nil
}
