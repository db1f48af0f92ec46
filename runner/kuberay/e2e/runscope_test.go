package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/runner/kuberay"
)

// runStep prepares step asset of the Dagster run runID with
// spec.cluster.reuse: run, its state dir stateDir.
func runStep(t *testing.T, bin, ns, runID, asset, stateDir string, set ...string) *dagsterStep {
	t.Helper()
	s := newDagsterStep(t, bin, ns, append([]string{"spec.cluster.reuse=run"}, set...)...)
	s.runID = runID
	data := pipes.ContextData{RunID: runID, AssetKeys: []string{asset}, Extras: map[string]any{}}
	boot, err := pipes.BootstrapEnv(pipes.ContextDataParams(data), pipes.FileMessagesParams(s.messages))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range s.env {
		if !strings.HasPrefix(kv, "DAGSTER_PIPES_") {
			env = append(env, kv)
		}
	}
	for k, v := range boot {
		env = append(env, k+"="+v)
	}
	s.env = append(env, "XDG_STATE_HOME="+stateDir)
	return s
}

// TestRunScopedCluster: two steps of one Dagster run with reuse: run,
// started together, create exactly one RayCluster (kind run, named after
// the run and the cluster section), both succeed on it through RayJobs of
// their own, it stays after both; a step of the same run with another
// cluster section gets a second one; `down --dagster-run-id` leaves
// nothing, and says so when run again.
func TestRunScopedCluster(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-run-scope")
	state := t.TempDir()
	run := "0f3c9a7e-" + fmt.Sprint(time.Now().UnixNano()%100000)
	ray := admin(t).Ray.RayV1()
	clusters := added(t, func(o metav1.ListOptions) (watch.Interface, error) { return ray.RayClusters(ns).Watch(t.Context(), o) })

	a := runStep(t, bin, ns, run, "e2e/model", state).start(t)
	b := runStep(t, bin, ns, run, "e2e/auc", state).start(t)
	for name, p := range map[string]*process{"model": a, "auc": b} {
		if code := p.wait(t, 5*time.Minute); code != 0 {
			t.Fatalf("step %s exited %d, want 0:\n%s", name, code, p.out.String())
		}
	}
	made := clusters()
	if len(made) != 1 {
		t.Fatalf("two steps of one run created %d RayClusters, want 1", len(made))
	}
	rc := made[0].(*rayv1.RayCluster)
	if rc.Labels[kuberay.LabelKind] != kuberay.KindRun || !strings.HasPrefix(rc.Name, "run-0f3c9a7e-") {
		t.Errorf("RayCluster %s with kind %q, want run-0f3c9a7e-... of kind run", rc.Name, rc.Labels[kuberay.LabelKind])
	}
	if after := rayCluster(t, ns, rc.Name); after.UID != rc.UID || after.DeletionTimestamp != nil {
		t.Errorf("a step deleted the run's cluster")
	}
	ls := mustRaystep(t, interactiveEnv(t), "ls", "-n", ns)
	if !strings.Contains(ls.stdout, rc.Name) || !strings.Contains(ls.stdout, " run ") {
		t.Errorf("ls does not show %s of KIND run:\n%s", rc.Name, ls.stdout)
	}

	c := runStep(t, bin, ns, run, "e2e/predictions", state, "spec.cluster.head.cpus=2").start(t)
	if code := c.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("step with another cluster section exited %d, want 0:\n%s", code, c.out.String())
	}
	if n := len(clusters()); n != 2 {
		t.Errorf("another cluster section made %d RayClusters in all, want 2", n)
	}
	env := append(interactiveEnv(t), "XDG_STATE_HOME="+state)
	down := mustRaystep(t, env, "down", "-n", ns, "--dagster-run-id", run)
	if strings.Count(down.stdout, "deleted") != 2 {
		t.Errorf("down --dagster-run-id said:\n%s, want two clusters deleted", down.stdout)
	}
	nothingLeft(t, ns)
	if again := mustRaystep(t, env, "down", "-n", ns, "--dagster-run-id", run); !strings.Contains(again.stdout, "nothing to delete") {
		t.Errorf("down --dagster-run-id again said %q, want nothing to delete", again.stdout)
	}
}

// TestRunScopedClusterExpires: the cluster of a run whose steps were
// SIGKILLed and whose sensor never ran is removed by gc once its expiry
// has passed (here moved to the past), and kept before.
func TestRunScopedClusterExpires(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-run-expire")
	run := "5d1e2f3a-" + fmt.Sprint(time.Now().UnixNano()%100000)
	p := runStep(t, bin, ns, run, "e2e/model", t.TempDir()).start(t)
	if code := p.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("step exited %d, want 0:\n%s", code, p.out.String())
	}
	list, err := admin(t).Ray.RayV1().RayClusters(ns).List(t.Context(), metav1.ListOptions{LabelSelector: kuberay.LabelKind + "=" + kuberay.KindRun})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("run clusters: %v %v, want 1", len(list.Items), err)
	}
	rc := list.Items[0]
	env := interactiveEnv(t)
	if gc := mustRaystep(t, env, "gc", "-n", ns); !strings.Contains(gc.stdout, "expires in") {
		t.Errorf("gc before the expiry said:\n%s", gc.stdout)
	}
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kuberay.AnnotationExpires, past)
	if _, err := admin(t).Ray.RayV1().RayClusters(ns).Patch(t.Context(), rc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if gc := mustRaystep(t, env, "gc", "-n", ns); !strings.Contains(gc.stdout, rc.Name) {
		t.Errorf("gc after the expiry said:\n%s", gc.stdout)
	}
	now, err := admin(t).Ray.RayV1().RayClusters(ns).Get(t.Context(), rc.Name, metav1.GetOptions{})
	if err == nil && now.DeletionTimestamp == nil {
		t.Errorf("gc kept the expired run cluster %s", rc.Name)
	}
}

// TestRunScopedClusterSIGKILLThenGC: a real step of a Dagster run with
// reuse: run and a short timeouts.run creates the run's RayCluster and is
// SIGKILLed with its process group (no teardown, no sensor). gc keeps the
// cluster until its expiry (the run's timeout after the step attached),
// then deletes it, and its pods go with it.
func TestRunScopedClusterSIGKILLThenGC(t *testing.T) {
	t.Parallel()
	setup(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-run-sigkill")
	t.Cleanup(func() { clearNamespace(t, ns) })
	run := "9e8d7c6b-" + fmt.Sprint(time.Now().UnixNano()%100000)
	ray := admin(t).Ray.RayV1()
	w, err := ray.RayClusters(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s := runStep(t, bin, ns, run, "e2e/model", t.TempDir(), "spec.timeouts.provision=50s", "spec.timeouts.run=1m")
	p := s.start(t)
	var rc *rayv1.RayCluster
	for rc == nil {
		select {
		case ev := <-w.ResultChan():
			if c, ok := ev.Object.(*rayv1.RayCluster); ok && ev.Type == watch.Added {
				rc = c
			}
		case <-p.done:
			t.Fatalf("raystep exited (%v) before it created the run's RayCluster:\n%s", p.err, p.out.String())
		case <-time.After(4 * time.Minute):
			t.Fatalf("no RayCluster after 4m:\n%s", p.out.String())
		}
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, time.Minute); code != -1 {
		t.Fatalf("SIGKILLed raystep exited %d, want killed", code)
	}
	if rc.Labels[kuberay.LabelKind] != kuberay.KindRun {
		t.Fatalf("RayCluster %s of kind %q, want run", rc.Name, rc.Labels[kuberay.LabelKind])
	}
	expires := expiry(t, rc)
	env := interactiveEnv(t)
	if gc := mustRaystep(t, env, "gc", "-n", ns); !strings.Contains(gc.stdout, "kept RayCluster "+ns+"/"+rc.Name+": run-scoped, expires in ") {
		t.Errorf("gc before the expiry said:\n%s\nwant it to keep %s, run-scoped", gc.stdout, rc.Name)
	}
	if got := rayCluster(t, ns, rc.Name); got.UID != rc.UID || got.DeletionTimestamp != nil {
		t.Fatalf("gc before the expiry deleted the run's cluster")
	}
	select { // until the expiry has passed: RFC 3339 keeps whole seconds
	case <-time.After(time.Until(expires.Add(time.Second))):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	if gc := mustRaystep(t, env, "gc", "-n", ns); !strings.Contains(gc.stdout, "deleted RayCluster "+ns+"/"+rc.Name+": run-scoped, expired ") {
		t.Errorf("gc after the expiry said:\n%s\nwant it to delete %s, run-scoped and expired", gc.stdout, rc.Name)
	}
	// Wait by watch until gc's delete is done (deleting again is a no-op).
	i := &kuberay.Interactive{Kube: admin(t).Kube, Ray: admin(t).Ray}
	if err := i.Delete(t.Context(), ns, rc.Name, rc.UID); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, ns)
}
