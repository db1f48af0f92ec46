package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
)

// The tests here drive interactive clusters the way a person does: the
// built raystep's up, ls, gc and down against the shared environment
// (real API server, scheduler, KubeRay operator, kwok nodes).

// interactiveEnv is the built raystep's environment: the test cluster's
// kubeconfig, the KubeRay backend and the examples' platform profile.
func interactiveEnv(t *testing.T, more ...string) []string {
	t.Helper()
	profile, err := filepath.Abs("../../../examples/platform.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A state dir of the test's own: up keeps the tokens it makes there,
	// not in the state dir of whoever runs the tests.
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "XDG_STATE_HOME=" + t.TempDir(),
		"KUBECONFIG=" + shared.k8s.KubeConfigPath, "RAYSTEP_BACKEND=kuberay", "RAYSTEP_PROFILE=" + profile}, more...)
}

// outcome is how one raystep command ended.
type outcome struct {
	code           int
	stdout, stderr string
}

// raystepIn runs the built raystep to its end with env and returns its
// exit code and output.
func raystepIn(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	return raystepCtx(t.Context(), t, env, args...)
}

// raystepCtx is raystepIn killing raystep when ctx ends (exit code -1).
func raystepCtx(ctx context.Context, t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	cmd := exec.CommandContext(ctx, buildRaystep(t), args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("raystep %s: %v", strings.Join(args, " "), err)
	}
	o := outcome{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("raystep %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), o.code, o.stdout, o.stderr)
	if line := klogLine.FindString(o.stderr); line != "" {
		t.Errorf("raystep %s printed a line of the Kubernetes client libraries' log, which is debug output: %q", strings.Join(args, " "), line)
	}
	return o
}

// klogLine is a line as the Kubernetes client libraries log it (klog's
// header: severity, date, time, thread, file:line), e.g. a port-forward's
// "Unhandled Error" for each connection the pod refused.
var klogLine = regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ ]+:\d+\] .*$`)

// mustRaystep is raystepIn that fails the test unless raystep exits 0.
func mustRaystep(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	o := raystepIn(t, env, args...)
	if o.code != 0 {
		t.Fatalf("raystep %s exited %d, want 0: %s", strings.Join(args, " "), o.code, o.stderr)
	}
	return o
}

// rayCluster returns the RayCluster ns/name.
func rayCluster(t *testing.T, ns, name string) *rayv1.RayCluster {
	t.Helper()
	rc := &rayv1.RayCluster{}
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, rc); err != nil {
		t.Fatalf("RayCluster %s/%s: %v", ns, name, err)
	}
	return rc
}

// expiry reads the expiry annotation of rc.
func expiry(t *testing.T, rc *rayv1.RayCluster) time.Time {
	t.Helper()
	e, ok := kuberay.Expiry(rc)
	if !ok {
		t.Fatalf("RayCluster %s: expiry annotation %q", rc.Name, rc.Annotations[kuberay.AnnotationExpires])
	}
	return e
}

// within fails the test unless got is ttl after a moment between before
// and after (RFC 3339 keeps whole seconds).
func within(t *testing.T, what string, got, before, after time.Time, ttl time.Duration) {
	t.Helper()
	if got.Before(before.Add(ttl).Truncate(time.Second)) || got.After(after.Add(ttl)) {
		t.Errorf("%s expires %s, want %s after the command ran (%s to %s)", what, got, ttl, before, after)
	}
}

// TestInteractiveLifecycle: `up` with flags alone makes a ready RayCluster
// from the profile (GPU placement, owner, expiry), a second `up` of the
// same name extends it instead of making a twin, `ls` lists it beside
// the steps, `down` refuses a name that is not an interactive cluster and
// then leaves nothing of it.
func TestInteractiveLifecycle(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-up")
	env := interactiveEnv(t)
	before := time.Now()
	o := mustRaystep(t, env, "up", "-n", ns, "--gpu", "a100-80gb", "--workers", "1", "--cpus", "2", "--memory", "8Gi",
		"--name", "alice-dev", "--owner", "alice", "--ttl", "1h")
	after := time.Now()
	for _, want := range []string{"RayCluster " + ns + "/alice-dev is ready",
		"Dashboard: http://alice-dev-head-svc." + ns + ".svc.cluster.local:8265", "RAY_ADDRESS=http://alice-dev-head-svc."} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("up printed %q, want %q", o.stdout, want)
		}
	}
	rc := rayCluster(t, ns, "alice-dev")
	if rc.Labels[kuberay.LabelKind] != "interactive" || rc.Labels[kuberay.LabelOwner] != "alice" || rc.Labels[kuberay.LabelManagedBy] != "raystep" {
		t.Errorf("labels %v, want raystep's, kind interactive, owner alice", rc.Labels)
	}
	within(t, "up --ttl 1h", expiry(t, rc), before, after, time.Hour)
	onGPUNode(t, ns, "alice-dev")

	before = time.Now()
	o = mustRaystep(t, env, "up", "-n", ns, "--name", "alice-dev", "--owner", "alice", "--ttl", "4h")
	after = time.Now()
	if !strings.Contains(o.stderr, "RayCluster "+ns+"/alice-dev exists: expiry moved from") {
		t.Errorf("second up said %q, want that it extended the cluster", o.stderr)
	}
	extended := rayCluster(t, ns, "alice-dev")
	if extended.UID != rc.UID {
		t.Errorf("second up replaced the RayCluster (UID %s, was %s)", extended.UID, rc.UID)
	}
	within(t, "up --ttl 4h again", expiry(t, extended), before, after, 4*time.Hour)
	clusters := &rayv1.RayClusterList{}
	if err := shared.k8s.Client.List(t.Context(), clusters, client.InNamespace(ns)); err != nil || len(clusters.Items) != 1 {
		t.Errorf("RayClusters in %s: %d (%v), want the one", ns, len(clusters.Items), err)
	}

	lsShowsInteractive(t, env, ns, expiry(t, extended))

	o = raystepIn(t, env, "down", "-n", ns, "nope")
	if o.code != 2 || !strings.Contains(o.stderr, "not a raystep interactive cluster") {
		t.Errorf("down nope: exit %d %q, want 2 saying it is not an interactive cluster", o.code, o.stderr)
	}
	o = mustRaystep(t, env, "down", "-n", ns, "alice-dev")
	if !strings.Contains(o.stdout, "RayCluster "+ns+"/alice-dev deleted") {
		t.Errorf("down printed %q", o.stdout)
	}
	nothingLeft(t, ns) // down returned once the RayCluster and its pods were gone
}

// onGPUNode checks that the cluster's worker runs on the profile's A100
// pool.
func onGPUNode(t *testing.T, ns, name string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := shared.k8s.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"ray.io/cluster": name, "ray.io/node-type": "worker"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d worker pods, want 1", len(pods.Items))
	}
	if p := pods.Items[0]; !strings.HasPrefix(p.Spec.NodeName, "gpu-a100-80gb-") || p.Status.Phase != corev1.PodRunning {
		t.Errorf("worker %s on node %q (%s), want running on the A100 pool", p.Name, p.Spec.NodeName, p.Status.Phase)
	}
}

// lsShowsInteractive checks the cluster's row of `ls` and `ls -o json`.
func lsShowsInteractive(t *testing.T, env []string, ns string, expires time.Time) {
	t.Helper()
	var rows []fleet.Record
	if err := json.Unmarshal([]byte(mustRaystep(t, env, "ls", "-n", ns, "-o", "json").stdout), &rows); err != nil {
		t.Fatalf("ls -o json: %v", err)
	}
	if len(rows) != 1 {
		t.Fatalf("ls -o json listed %d rows, want the cluster", len(rows))
	}
	r := rows[0]
	got := []any{r.Name, r.ClusterKind, r.Owner, r.GPUs, r.Deployment, r.Expires != nil && r.Expires.Equal(expires)}
	want := []any{"alice-dev", "interactive", "alice", "a100-80gb=1", "ready", true}
	if !equalAll(got, want) {
		t.Errorf("ls -o json row %+v: got %v, want %v (expiry %s)", r, got, want, expires)
	}
	table := mustRaystep(t, env, "ls", "-n", ns).stdout
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME ") || strings.Join(strings.Fields(lines[1])[:5], " ") != "alice-dev interactive alice - a100-80gb=1" ||
		!strings.Contains(lines[1], " in ") {
		t.Errorf("ls printed:\n%s\nwant the cluster's row: KIND interactive, owner, GPUs, expiry", table)
	}
}

func equalAll(got, want []any) bool {
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return len(got) == len(want)
}

// TestUpUnknownGPUPoolFailsFast: a GPU type the profile knows but no node
// offers fails up at once with the scheduler's reason (exit 3), and the
// half-made cluster is deleted.
func TestUpUnknownGPUPoolFailsFast(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-up-unschedulable")
	buildRaystep(t) // not timed
	start := time.Now()
	o := raystepIn(t, interactiveEnv(t), "up", "-n", ns, "--gpu", "l4", "--name", "bob-l4", "--owner", "bob")
	took := time.Since(start)
	if o.code != 3 {
		t.Fatalf("up --gpu l4 exited %d, want 3", o.code)
	}
	for _, want := range []string{"RayCluster " + ns + "/bob-l4: pod bob-l4-", ": Unschedulable: ", "didn't match Pod's node affinity/selector",
		"RayCluster " + ns + "/bob-l4 deleted"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("up said %q, want %q", o.stderr, want)
		}
	}
	if took > time.Minute {
		t.Errorf("up failed after %s, want well before timeouts.provision (15m)", took)
	}
	t.Logf("FIGURES up --gpu l4 failed and cleaned up after %s", took.Round(time.Millisecond))
	nothingLeft(t, ns)
}

// TestUpSIGTERMDeletesWhatItCreated: SIGTERM while up waits for a cluster
// (its worker Unschedulable within a long grace) deletes the cluster and
// exits 143.
func TestUpSIGTERMDeletesWhatItCreated(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-up-sigterm")
	out := newLineWaiter()
	cmd := exec.Command(buildRaystep(t), "up", "-n", ns, "--gpu", "l4", "--name", "carol-wait", "--owner", "carol")
	cmd.Env = interactiveEnv(t, "RAYSTEP_UNSCHEDULABLE_GRACE=10m")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	if !out.await(t, "waiting until it is ready", done) {
		t.Fatalf("up ended before it waited:\n%s", out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("up still running 3m after SIGTERM:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("up exited %d after SIGTERM, want 143:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "RayCluster "+ns+"/carol-wait deleted") {
		t.Errorf("up said:\n%s\nwant that it deleted the cluster", out.String())
	}
	nothingLeft(t, ns)
}

// TestGCExpiredInteractive: gc deletes an interactive cluster whose
// expiry has passed and keeps a live one, saying why; --dry-run only
// says so.
func TestGCExpiredInteractive(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-gc-interactive")
	env := interactiveEnv(t)
	mustRaystep(t, env, "up", "-n", ns, "--name", "short", "--owner", "dave", "--ttl", "1s")
	mustRaystep(t, env, "up", "-n", ns, "--name", "long", "--owner", "dave", "--ttl", "1h")
	short := rayCluster(t, ns, "short")
	select { // until its 1s TTL has passed
	case <-time.After(time.Until(expiry(t, short).Add(100 * time.Millisecond))):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	for _, tt := range []struct {
		args       []string
		del, keep  string
		deleteDone bool
	}{
		{[]string{"gc", "-n", ns, "--dry-run"}, "would delete RayCluster " + ns + "/short: interactive, expired ", "would keep RayCluster " + ns + "/long: interactive, expires in ", false},
		{[]string{"gc", "-n", ns}, "deleted RayCluster " + ns + "/short: interactive, expired ", "kept RayCluster " + ns + "/long: interactive, expires in ", true},
	} {
		o := mustRaystep(t, env, tt.args...)
		if !strings.Contains(o.stdout, tt.del) || !strings.Contains(o.stdout, tt.keep) {
			t.Errorf("raystep %s printed %q, want %q and %q", strings.Join(tt.args, " "), o.stdout, tt.del, tt.keep)
		}
		now := &rayv1.RayCluster{}
		err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "short"}, now)
		if deleting := err != nil || now.DeletionTimestamp != nil; deleting != tt.deleteDone {
			t.Errorf("after raystep %s the expired cluster is being deleted: %v, want %v", strings.Join(tt.args, " "), deleting, tt.deleteDone)
		}
	}
	if rc := rayCluster(t, ns, "long"); rc.DeletionTimestamp != nil {
		t.Errorf("gc is deleting the live cluster")
	}
	// Wait by watch until gc's delete is done (deleting again is a no-op).
	i := &kuberay.Interactive{Kube: admin(t).Kube, Ray: admin(t).Ray}
	if err := i.Delete(t.Context(), ns, "short", short.UID); err != nil {
		t.Fatal(err)
	}
	mustRaystep(t, env, "down", "-n", ns, "long")
	nothingLeft(t, ns)
}

// TestDownRefusesOtherRayClusters: down deletes nothing but raystep's
// interactive clusters: a RayCluster labelled as a step's is refused
// (exit 2) and left alone.
func TestDownRefusesOtherRayClusters(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-down-refuses")
	s := spec(t)
	rc, err := kuberay.BuildCluster(s, shared.profile, ns, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rc.Labels[kuberay.LabelKind] = "train" // a step's
	rc.Spec.ManagedBy = ptr("kueue.x-k8s.io/multikueue")
	if err := shared.k8s.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	o := raystepIn(t, interactiveEnv(t), "down", "-n", ns, rc.Name)
	if o.code != 2 || !strings.Contains(o.stderr, "RayCluster "+ns+"/"+rc.Name+": not a raystep interactive cluster") {
		t.Errorf("down of a step's RayCluster: exit %d %q, want 2 and why", o.code, o.stderr)
	}
	if got := rayCluster(t, ns, rc.Name); got.DeletionTimestamp != nil {
		t.Errorf("down is deleting a RayCluster that is not interactive")
	}
	i := &kuberay.Interactive{Kube: admin(t).Kube, Ray: admin(t).Ray}
	if err := i.Delete(t.Context(), ns, rc.Name, ""); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, ns)
}

// admin returns clients with the test cluster's admin credentials.
func admin(t *testing.T) *kuberay.Clients {
	t.Helper()
	c, err := kuberay.NewClients(shared.k8s.Config, kuberay.ConnectOptions{UserAgent: "raystep-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lineWaiter records output and wakes waiters at each write.
type lineWaiter struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newLineWaiter() *lineWaiter { return &lineWaiter{changed: make(chan struct{})} }

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return n, err
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// await returns true once the output holds sub, false if done is closed
// first (the process ended); it fails the test after a generous bound.
func (w *lineWaiter) await(t *testing.T, sub string, done <-chan struct{}) bool {
	t.Helper()
	bound := time.After(2 * time.Minute)
	for {
		w.mu.Lock()
		found, changed := strings.Contains(w.b.String(), sub), w.changed
		w.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return strings.Contains(w.String(), sub)
		case <-bound:
			t.Fatalf("no %q after 2m:\n%s", sub, w.String())
		}
	}
}

// secretEnvSpec is a job spec whose cluster takes WANDB_API_KEY from the
// Secret wandb: a head and one CPU worker.
const secretEnvSpec = `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: sam-dev, owner: sam}
spec:
  kind: train
  entrypoint: python train.py
  cluster:
    rayVersion: "2.60.0"
    image: rayproject/ray:2.60.0-py311
    head: {cpus: 1, memory: 2Gi}
    workers:
      - {name: cpu, replicas: 1, cpus: 1, memory: 2Gi}
    secretEnv:
      - {name: WANDB_API_KEY, secret: wandb, key: api-key}
`

// TestUpFromSpecCarriesSecretEnv: `up -f SPEC` makes a cluster whose head
// and worker pods, as the real operator creates them, take the variable of
// spec.cluster.secretEnv from the Secret by reference; the value is in
// neither the RayCluster nor anything raystep printed.
func TestUpFromSpecCarriesSecretEnv(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-secretenv")
	const value = "wandb-value-4e1d"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wandb"}, StringData: map[string]string{"api-key": value}}
	if err := shared.k8s.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shared.k8s.Client.Delete(context.Background(), secret) }) // the user's, not raystep's to remove
	file := filepath.Join(t.TempDir(), "sam.yaml")
	if err := os.WriteFile(file, []byte(secretEnvSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	env := interactiveEnv(t)
	o := mustRaystep(t, env, "up", "-n", ns, "-f", file, "--ttl", "1h")
	pods := &corev1.PodList{}
	if err := shared.k8s.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"ray.io/cluster": "sam-dev"}); err != nil {
		t.Fatal(err)
	}
	want := corev1.EnvVar{Name: "WANDB_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "wandb"}, Key: "api-key"}}}
	types := map[string]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return reflect.DeepEqual(e, want) }) {
				t.Errorf("pod %s container %s env %v, want WANDB_API_KEY from Secret wandb's api-key", p.Name, c.Name, c.Env)
			}
		}
		types[p.Labels["ray.io/node-type"]] = true
	}
	if !types["head"] || !types["worker"] {
		t.Errorf("pods of sam-dev: %v, want a head and a worker", types)
	}
	rc, err := json.Marshal(rayCluster(t, ns, "sam-dev"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rc), value) || strings.Contains(o.stdout+o.stderr, value) {
		t.Errorf("the secret's value is in the RayCluster or in up's output")
	}
	mustRaystep(t, env, "down", "-n", ns, "sam-dev")
	nothingLeft(t, ns)
}
