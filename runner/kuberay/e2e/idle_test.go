package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/test/jupytertest"
)

// TestIdleReleaseAndRestore: the built raystep's gc, alone and as the
// ServiceAccount of examples/k8s/gc.yaml (its CronJob), keeps the GPU
// worker of an interactive cluster that runs a Ray job, and one whose
// notebook kernel executes code, releases it once
// the cluster was idle for --idle (the worker pod is deleted, ls says so
// and since when); a step borrowing the cluster (run --cluster) brings
// it back on the GPU pool, and so, after the next release, does `raystep
// up NAME`; a later gc deletes the cluster once idle for --idle-stop.
//
// The sandbox's clusters share one real Ray head, whose job list holds
// every test's jobs; this cluster's dashboard port goes (by kwok) to a
// filter in front of that head which shows it only the jobs this test
// submits, as a cluster of its own would.
func TestIdleReleaseAndRestore(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-idle")
	env := interactiveEnv(t)
	gcEnv := append(interactiveEnv(t), "KUBECONFIG="+gcAccount(t, ns))
	jobsOf(t, shared.idleDashboard, shared.head.DashboardURL(), ns, "raystep-notebook-idle-dev-")

	s := spec(t, "metadata.name=idle-dev", "metadata.owner=alice")
	rc, err := kuberay.BuildCluster(s, shared.profile, ns, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const idle = 3 * time.Second
	kuberay.SetIdle(rc.Annotations, fleet.Idle{Release: idle}, time.Now())
	c := &rc.Spec.HeadGroupSpec.Template.Spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "dashboard", ContainerPort: int32(idleDashboardPort())})
	i := &kuberay.Interactive{Kube: admin(t).Kube, Ray: admin(t).Ray}
	upped, err := i.Up(t.Context(), rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // gc deletes it in the end; this is for a test that failed before
		_ = i.Delete(context.WithoutCancel(t.Context()), ns, "idle-dev", upped.Cluster.UID)
	})
	if _, err := i.AwaitReady(t.Context(), upped.Cluster); err != nil {
		t.Fatal(err)
	}
	onGPUNode(t, ns, "idle-dev")

	// Busy: a job runs on the cluster; its idle window has long passed.
	ray, err := raysubmit.New(raysubmit.Config{BaseURL: shared.head.DashboardURL(), UserAgent: "raystep-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	busy := ns + "-busy"
	if _, err := ray.Submit(t.Context(), raysubmit.SubmitRequest{SubmissionID: busy, Entrypoint: "sleep 600"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ray.Stop(context.WithoutCancel(t.Context()), busy) })
	awaitClock(t, rayCluster(t, ns, "idle-dev").CreationTimestamp.Add(idle+time.Second))
	gc := mustRaystep(t, gcEnv, "gc", "-n", ns)
	if !strings.Contains(gc.stdout, "kept RayCluster "+ns+"/idle-dev") || !strings.Contains(gc.stdout, "in use: Ray job "+busy+" is") {
		t.Errorf("gc while a job runs said:\n%s\nwant it to keep the cluster, in use by %s", gc.stdout, busy)
	}
	onGPUNode(t, ns, "idle-dev")

	// Busy: a notebook kernel executes code, through up --notebook's
	// notebook, while the job ends.
	nbEnv := append(interactiveEnv(t), "RAYSTEP_PROFILE="+notebookProfile(t))
	takeNotebookPort(t, "idle-dev")
	mustRaystep(t, nbEnv, "up", "-n", ns, "--name", "idle-dev", "--owner", "alice", "--notebook", "--idle", idle.String())
	nb := startHolder(t, nbEnv, "notebook", "-n", ns, "idle-dev")
	u, err := url.Parse(nb.url)
	if err != nil {
		t.Fatal(err)
	}
	kernel := jupytertest.StartBusy(t, u)
	if _, err := ray.Stop(t.Context(), busy); err != nil {
		t.Fatal(err)
	}
	ended, err := ray.Wait(t.Context(), busy)
	if err != nil {
		t.Fatal(err)
	}
	awaitClock(t, ended.Ended().Add(idle+time.Second))
	gc = mustRaystep(t, gcEnv, "gc", "-n", ns)
	if !strings.Contains(gc.stdout, "kept RayCluster "+ns+"/idle-dev") || !strings.Contains(gc.stdout, "in use: notebook kernel ") {
		t.Errorf("gc while a notebook kernel executes said:\n%s\nwant it to keep the cluster, in use by the kernel", gc.stdout)
	}
	onGPUNode(t, ns, "idle-dev")

	// Idle: the kernel was shut down; once idle for --idle, one gc gives
	// the GPU back.
	kernel.Shutdown(t)
	nb.stop(t, syscall.SIGINT)
	awaitClock(t, time.Now().Add(idle+2*time.Second))
	gc = mustRaystep(t, gcEnv, "gc", "-n", ns)
	if !strings.Contains(gc.stdout, "released 1 GPU worker(s) of RayCluster "+ns+"/idle-dev: idle for ") {
		t.Fatalf("gc once idle said:\n%s\nwant it to release the GPU worker", gc.stdout)
	}
	awaitWorkers(t, ns, "idle-dev", 0)
	row := lsOnly(t, env, ns)
	if !row.Released || row.GPUsHeld != "" || row.IdleSince == nil || row.IdleSince.Before(ended.Ended().Truncate(time.Second)) {
		t.Errorf("ls -o json after release: released %v, held %q, idle since %v; want released, none held, idle since the job ended (%s)",
			row.Released, row.GPUsHeld, row.IdleSince, ended.Ended())
	}
	if table := mustRaystep(t, env, "ls", "-n", ns).stdout; !strings.Contains(table, " released ") {
		t.Errorf("ls after release:\n%s\nwant GPUS released", table)
	}

	// A step borrowing the cluster brings the GPU worker back by itself.
	step := newDagsterStep(t, buildRaystep(t), ns)
	step.args = append(step.args, "--cluster", "idle-dev")
	p := step.start(t)
	code := p.wait(t, 4*time.Minute)
	if msgs, err := os.ReadFile(step.messages); code != 0 || err != nil || !strings.Contains(string(msgs), "the step brought them back") {
		t.Fatalf("run --cluster on the released cluster exited %d (%v), want 0 telling Dagster it brought the GPU workers back:\n%s", code, err, msgs)
	}
	awaitWorkers(t, ns, "idle-dev", 1)
	onGPUNode(t, ns, "idle-dev")

	// Idle again: released again.
	awaitClock(t, kuberayActiveAt(t, rayCluster(t, ns, "idle-dev")).Add(idle+time.Second))
	gc = mustRaystep(t, gcEnv, "gc", "-n", ns)
	if !strings.Contains(gc.stdout, "released 1 GPU worker(s) of RayCluster "+ns+"/idle-dev") {
		t.Fatalf("gc once idle after the step said:\n%s\nwant it to release the GPU worker again", gc.stdout)
	}
	awaitWorkers(t, ns, "idle-dev", 0)

	// up NAME brings the GPU worker back, and sets idle-stop.
	up := mustRaystep(t, env, "up", "-n", ns, "--name", "idle-dev", "--owner", "alice", "--idle", "3s", "--idle-stop", "6s")
	if !strings.Contains(up.stderr, "bringing back the GPU workers") {
		t.Errorf("up on the released cluster said %q, want that it brings back its GPU workers", up.stderr)
	}
	onGPUNode(t, ns, "idle-dev") // up returned once the worker runs
	if row := lsOnly(t, env, ns); row.Released || row.GPUsHeld != "a100-80gb=1" || row.IdleSince != nil {
		t.Errorf("ls -o json after up: released %v, held %q, idle since %v; want the GPU held and not idle", row.Released, row.GPUsHeld, row.IdleSince)
	}

	// Idle past --idle-stop: gc deletes the whole cluster.
	awaitClock(t, kuberayActiveAt(t, rayCluster(t, ns, "idle-dev")).Add(6*time.Second+time.Second))
	gc = mustRaystep(t, gcEnv, "gc", "-n", ns)
	if !strings.Contains(gc.stdout, "deleted RayCluster "+ns+"/idle-dev: interactive, idle for ") || !strings.Contains(gc.stdout, "past --idle-stop 6s") {
		t.Errorf("gc past --idle-stop said:\n%s\nwant it to delete the cluster", gc.stdout)
	}
	if err := i.Delete(t.Context(), ns, "idle-dev", ""); err != nil { // waits by watch for gc's delete
		t.Fatal(err)
	}
	nothingLeft(t, ns)
}

// kuberayActiveAt reads when up last marked rc in use.
func kuberayActiveAt(t *testing.T, rc *rayv1.RayCluster) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, rc.Annotations[kuberay.AnnotationActiveAt])
	if err != nil {
		t.Fatalf("RayCluster %s: %s: %v", rc.Name, kuberay.AnnotationActiveAt, err)
	}
	return at
}

// awaitClock waits until this machine's clock (which the sandbox's API
// server and Ray head share) has passed at: idleness is a matter of time.
func awaitClock(t *testing.T, at time.Time) {
	t.Helper()
	select {
	case <-time.After(time.Until(at)):
	case <-t.Context().Done():
		t.Fatal("test ended while waiting for the clock")
	}
}

// awaitWorkers waits, within a bound that only catches a hang, until the
// cluster has n worker pods, each running.
func awaitWorkers(t *testing.T, ns, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods := &corev1.PodList{}
		if err := shared.k8s.Client.List(t.Context(), pods, client.InNamespace(ns),
			client.MatchingLabels{"ray.io/cluster": name, "ray.io/node-type": "worker"}); err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if len(pods.Items) == n && running == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("RayCluster %s/%s has %d worker pods, %d running, want %d running", ns, name, len(pods.Items), running, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lsOnly is the one row of `raystep ls -n ns -o json`.
func lsOnly(t *testing.T, env []string, ns string) fleet.Record {
	t.Helper()
	var rows []fleet.Record
	if err := json.Unmarshal([]byte(mustRaystep(t, env, "ls", "-n", ns, "-o", "json").stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("ls -o json: %d rows, %v; want one", len(rows), err)
	}
	return rows[0]
}

// jobsOf serves, on ln until the test ends, the Ray dashboard at target
// with its job list cut to the jobs whose submission id starts with one
// of prefixes.
func jobsOf(t *testing.T, ln net.Listener, target string, prefixes ...string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodGet || resp.Request.URL.Path != "/api/jobs/" || resp.StatusCode != http.StatusOK {
			return nil
		}
		var jobs []map[string]any
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &jobs); err != nil {
			return err
		}
		mine := []map[string]any{}
		for _, j := range jobs {
			id, _ := j["submission_id"].(string)
			if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(id, p) }) {
				mine = append(mine, j)
			}
		}
		out, err := json.Marshal(mine)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(out))
		resp.ContentLength = int64(len(out))
		resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
		return nil
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// gcFile is the scheduled gc's example: its Role and its CronJob.
const gcFile = "../../../examples/k8s/gc.yaml"

// gcRole is gcFile, granted to the ServiceAccount raystep-gc.
var gcRole = roleFile{path: gcFile, as: func(ns string) *rest.Config { return asAccount(ns, "raystep-gc") }}

// gcAccount applies gcFile's ServiceAccount, Role and RoleBinding in ns,
// checks its CronJob with the API server (a dry-run create) and returns a
// kubeconfig that impersonates the account.
func gcAccount(t *testing.T, ns string) string {
	t.Helper()
	applyRBAC(t, gcRole, ns, func(rules []any) []any { return rules })
	return kubeconfigAs(t, gcRole.as(ns))
}
