package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/history"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
)

// TestGCOrphans crafts what SIGKILLed steps leave: a RayJob waiting past
// its provision timeout and one running on time (both held away from the
// operator with managedBy, so their status stays as written), and a real
// killed step whose RayJob the operator failed at its provision deadline.
// gc deletes the first and the last, with their RayClusters and pods, and
// never the one running on time.
func TestGCOrphans(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-gc")
	admin, err := kuberay.NewClients(shared.k8s.Config, kuberay.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	waiting := craft(t, admin, ns, "orphan-waiting", rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting,
		StartTime: &metav1.Time{Time: now.Add(-time.Hour)}})
	running := craft(t, admin, ns, "orphan-running", rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning,
		StartTime: &metav1.Time{Time: now.Add(-time.Minute)}})

	// A real step killed while provisioning, with a 1s provision deadline
	// and a 1s TTL: the operator fails it, then deletes its RayCluster.
	s := spec(t, "spec.timeouts.provision=1s", "spec.timeouts.ttlAfterFinished=1s")
	st := step(s, runID(t))
	killed := runner.StepID(st.Name, st.Dagster.RunID, st.Dagster.Key(), 0)
	b := backend(t, s, ns, nil, nil)
	st.Namespace = ns
	cl, err := b.Provision(t.Context(), runner.Resolve(st, nil), runner.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_ = cl.Teardown(t.Context(), true)
	waitStatus(t.Context(), ns, rayv1.JobDeploymentStatusFailed)
	failed, err := admin.Ray.RayV1().RayJobs(ns).Get(t.Context(), killed, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the killed step's failed RayJob: %v", err)
	}
	if failed.Status.EndTime == nil {
		t.Fatalf("the killed step's RayJob failed without an endTime: %+v", failed.Status)
	}
	select { // until its 1s TTL has passed
	case <-time.After(time.Until(failed.Status.EndTime.Add(time.Second + 100*time.Millisecond))):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}

	// The crafted RayJobs have no heartbeat Lease, as an older raystep's;
	// the tiny grace judges them by their deadlines at once. The killed
	// step released its Lease at its (keeping) teardown.
	deleted := collectAll(t, admin, ns, kuberay.Deleted)
	slices.Sort(deleted)
	want := []string{waiting, killed}
	slices.Sort(want)
	if !slices.Equal(deleted, want) {
		t.Errorf("gc deleted %v, want %v (never %s)", deleted, want, running)
	}
	waitGone(t, admin, ns, want)
	if _, err := admin.Ray.RayV1().RayJobs(ns).Get(t.Context(), running, metav1.GetOptions{}); err != nil {
		t.Errorf("the RayJob running on time is gone: %v", err)
	}
	managedByOther(t, admin, ns, running)
}

// TestGCUnblocksARayJobKubeRayHolds: a RayJob with token authentication
// whose token Secret is gone, deleted the way kubectl deletes (the RayJob
// first, its dependents after), stays for good: KubeRay holds it until it
// has built a dashboard client to stop the Ray job, which needs the Secret
// while the RayCluster stands, and the RayCluster stands while the RayJob
// does. gc, as examples/k8s/gc.yaml's ServiceAccount, makes the Secret
// again; KubeRay then lets go, and the RayJob, its RayCluster and its pods
// are gone.
func TestGCUnblocksARayJobKubeRayHolds(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-gc-unblock")
	admin := adminClients(t)
	const name = "held"
	job, err := kuberay.Build(spec(t), tokenProfile(shared.profile), runner.Step{ID: name, RunID: "crafted", Namespace: ns, Dagster: runner.Dagster{StepKey: name}})
	if err != nil {
		t.Fatal(err)
	}
	job.Name, job.Namespace = name, ns
	job, err = admin.Ray.RayV1().RayJobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret := kuberay.AuthSecret(job)
	if secret == nil {
		t.Fatal("the RayJob has no token authentication")
	}
	token, err := kuberay.NewAuthToken()
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{kuberay.AuthTokenKey: []byte(token)}
	if _, err := admin.Kube.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods mean KubeRay has reconciled the RayJob, its finalizer put on.
	for !strings.Contains(leftovers(t.Context(), ns), "Pod ") {
		select {
		case <-t.Context().Done():
			t.Fatalf("no pod of the RayJob's cluster: %s", leftovers(context.Background(), ns))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := admin.Kube.CoreV1().Secrets(ns).Delete(t.Context(), secret.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bg := metav1.DeletePropagationBackground
	if err := admin.Ray.RayV1().RayJobs(ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	held, err := admin.Ray.RayV1().RayJobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil || !slices.Contains(held.Finalizers, "ray.io/rayjob-finalizer") {
		t.Fatalf("the deleted RayJob: %v, %v; want it held by KubeRay's finalizer", err, held)
	}

	applyRBAC(t, gcRole, ns, func(rules []any) []any { return rules })
	gc, err := kuberay.NewClients(gcRole.as(ns), kuberay.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if unblocked := collectAll(t, gc, ns, kuberay.Unblocked); !slices.Equal(unblocked, []string{name}) {
		t.Fatalf("gc unblocked %v, want [%s]", unblocked, name)
	}
	waitGone(t, admin, ns, []string{name})
}

// collectAll judges the RayJobs in ns as gc does, with a grace of a
// nanosecond, collects them with c and returns the names of those whose action
// was act.
func collectAll(t *testing.T, c *kuberay.Clients, ns string, act kuberay.Action) []string {
	t.Helper()
	jobs, leases := inventory(t, c, ns)
	verdicts := kuberay.JudgeAll(jobs, leases, time.Now(), kuberay.JudgeOptions{HeartbeatGrace: time.Nanosecond})
	var names []string
	err := kuberay.Collect(t.Context(), c.Kube, c.Ray, verdicts, false, func(r kuberay.Result) {
		t.Logf("gc: %s %s: %s; %s", r.Action, r.Job.Name, r.Reason, r.Note)
		if r.Action == act {
			names = append(names, r.Job.Name)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// craft creates a raystep RayJob the operator leaves alone, with status st.
func craft(t *testing.T, c *kuberay.Clients, ns, name string, st rayv1.RayJobStatus) string {
	t.Helper()
	job, err := kuberay.Build(spec(t), shared.profile, runner.Step{ID: name, RunID: "crafted", Namespace: ns, Dagster: runner.Dagster{StepKey: name}})
	if err != nil {
		t.Fatal(err)
	}
	job.Name, job.Namespace = name, ns
	job.Spec.ManagedBy = ptr("kueue.x-k8s.io/multikueue")
	got, err := c.Ray.RayV1().RayJobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status = st
	if _, err := c.Ray.RayV1().RayJobs(ns).UpdateStatus(t.Context(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// waitGone waits until the named RayJobs and every pod and RayCluster
// they had are gone.
func waitGone(t *testing.T, c *kuberay.Clients, ns string, names []string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		left := leftovers(t.Context(), ns)
		remaining := false
		for _, n := range names {
			if _, err := c.Ray.RayV1().RayJobs(ns).Get(t.Context(), n, metav1.GetOptions{}); err == nil {
				remaining = true
			}
		}
		if !remaining && !strings.Contains(left, "RayCluster") && !strings.Contains(left, "Pod ") {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("still there after gc: %s", leftovers(t.Context(), ns))
}

// managedByOther removes the crafted RayJob the test kept.
func managedByOther(t *testing.T, c *kuberay.Clients, ns, name string) {
	if err := c.Ray.RayV1().RayJobs(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete %s: %v", name, err)
	}
}

func ptr[T any](v T) *T { return &v }

// adminClients are clients of the test cluster with every right.
func adminClients(t *testing.T) *kuberay.Clients {
	t.Helper()
	c, err := kuberay.NewClients(shared.k8s.Config, kuberay.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// inventory lists what gc judges in ns: its RayJobs and heartbeat Leases.
func inventory(t *testing.T, c *kuberay.Clients, ns string) ([]rayv1.RayJob, map[string]*coordinationv1.Lease) {
	t.Helper()
	jobs, err := kuberay.ListRayJobs(t.Context(), c.Ray, ns)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := kuberay.ListLeases(t.Context(), c.Kube, ns)
	if err != nil {
		t.Fatal(err)
	}
	return jobs, leases
}

// TestGCJudgesHeartbeatsByTheServerClock: a step whose clock runs an hour
// behind writes renewTime an hour in the past at every renewal. gc judges
// by when the API server recorded the renewal, on the server's clock, so
// the step is alive; by renewTime and gc's own clock it would be deleted.
func TestGCJudgesHeartbeatsByTheServerClock(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-gc-skew")
	admin := adminClients(t)
	name := craft(t, admin, ns, "skewed-step", rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning,
		StartTime: &metav1.Time{Time: time.Now().Add(-2 * time.Hour)}})
	job, err := admin.Ray.RayV1().RayJobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder, renewed := "skewed-host/1", metav1.NewMicroTime(time.Now().Add(-time.Hour))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{kuberay.LabelManagedBy: kuberay.ManagedByRaystep},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: name, UID: job.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed, LeaseDurationSeconds: ptr(int32(3))},
	}
	if _, err := admin.Kube.CoordinationV1().Leases(ns).Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobs, leases := inventory(t, admin, ns)
	now, err := kuberay.ServerNow(t.Context(), admin.Kube, ns)
	if err != nil {
		t.Fatal(err)
	}
	if skew := time.Since(now); skew < -2*time.Second || skew > 2*time.Second {
		t.Errorf("ServerNow = %s, %s from this machine's clock (the same machine's)", now, skew)
	}
	o := kuberay.JudgeOptions{HeartbeatGrace: time.Second}
	for _, v := range kuberay.JudgeAll(jobs, leases, now, o) {
		if v.Job.Name == name && (v.Collect || !strings.HasPrefix(v.Reason, "step alive")) {
			t.Errorf("gc's verdict on the step with a slow clock: collect %v, %q; want alive", v.Collect, v.Reason)
		}
	}
	if got, err := admin.Kube.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(got.Items) != 1 {
		t.Errorf("Leases in %s after ServerNow: %v, %v; want only the step's (a dry run stores nothing)", ns, got, err)
	}
	if err := admin.Kube.CoordinationV1().Leases(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := admin.Ray.RayV1().RayJobs(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	waitGone(t, admin, ns, []string{name})
}

// TestBinarySIGKILLThenGCFreesTheCluster: while the built raystep runs,
// its heartbeat is fresh and `raystep gc` keeps its RayJob, saying why.
// Once it is SIGKILLed the heartbeat stops; as soon as the Lease's grace
// has passed, `raystep gc --heartbeat-grace 1s` deletes the RayJob (its
// deadlines are hours away), and the garbage collector removes its
// RayCluster, pods and Lease.
func TestBinarySIGKILLThenGCFreesTheCluster(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-bin-sigkill-gc")
	s := newDagsterStep(t, bin, ns, `spec.entrypoint=python -c "import time; time.sleep(120)"`, "spec.timeouts.run=6h")
	s.env = append(s.env, "RAYSTEP_HEARTBEAT_INTERVAL=1s")
	p := s.start(t)
	waitJobRunning(t, s, p)
	holder := fmt.Sprintf("/%d", p.cmd.Process.Pid)

	for _, args := range [][]string{{"gc", "-n", ns, "--dry-run"}, {"gc", "-n", ns}} {
		out := s.raystep(t, args...)
		want := "RayJob " + ns + "/" + s.id + ": step alive: heartbeat "
		if !strings.Contains(out, want) || !strings.Contains(out, holder+"\n") {
			t.Fatalf("raystep %s while the step runs printed %q, want a line with %q from pid %s", strings.Join(args, " "), out, want, holder)
		}
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, time.Minute); code != -1 {
		t.Fatalf("SIGKILLed raystep exited %d, want killed", code)
	}
	lease := &coordinationv1.Lease{}
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: s.id}, lease); err != nil {
		t.Fatalf("the killed step's heartbeat Lease: %v", err)
	}
	// gc's grace is the longer of the flag's 1s and the Lease's own
	// duration (three renewal intervals): wait until it has passed, by the
	// server's record of the last renewal, which is to the second and read
	// as the end of its second (and the server's clock is this machine's).
	stale := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second + 2*time.Second + 100*time.Millisecond)
	select {
	case <-time.After(time.Until(stale)):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	out := s.raystep(t, "gc", "-n", ns, "--heartbeat-grace", "1s")
	want := "deleted RayJob " + ns + "/" + s.id + ": step gone: no heartbeat from "
	if !strings.Contains(out, want) || !strings.Contains(out, holder+" for ") {
		t.Fatalf("raystep gc after the kill printed %q, want %q from pid %s", out, want, holder)
	}
	// The same gc recorded the killed step in this machine's history.
	if !strings.Contains(out, "history "+s.id+": recorded as reaped by gc") {
		t.Errorf("raystep gc after the kill did not record the step in the history: %q", out)
	}
	var recs []history.Record
	if err := json.Unmarshal([]byte(s.raystep(t, "ls", "--finished", "-o", "json")), &recs); err != nil || len(recs) != 1 ||
		recs[0].Name != s.id || recs[0].Reason != history.Reaped || recs[0].Backend != "kuberay" || recs[0].Namespace != ns {
		t.Errorf("ls --finished after gc: %+v (%v), want the step reaped by gc on kuberay in %s", recs, err, ns)
	}
	admin, err := kuberay.NewClients(shared.k8s.Config, kuberay.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, admin, ns, []string{s.id})
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: s.id}, lease); !apierrors.IsNotFound(err) {
		t.Errorf("the heartbeat Lease after gc: %v, want it garbage-collected with its RayJob", err)
	}
	nothingLeft(t, ns)
}

// raystep runs another command of the built binary with the step's
// environment and returns its stdout, failing the test unless it exits 0.
func (s *dagsterStep) raystep(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), s.bin, args...)
	cmd.Env = s.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("raystep %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	t.Logf("raystep %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}
