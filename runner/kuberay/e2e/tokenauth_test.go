package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
	"github.com/raystep/raystep/test/cluster"
	"github.com/raystep/raystep/test/raytest"
)

// The tests here turn on Ray's token authentication in the profile
// (spec.rayAuth.mode: token) against a second real Ray head that runs with
// RAY_AUTH_MODE=token; the package's shared head stays without. Its
// dashboard is the step's explicit URL, and a label on the RayJob
// (cluster.DashboardLabel, copied by KubeRay to the RayCluster) sends the
// operator's own dashboard calls there too, with the token KubeRay reads
// from the Secret raystep created.

// tokenRay is the token head, shared by the tests of this file; TestMain
// stops it.
var tokenRay = raytest.Shared{Options: rayhead.Options{TokenAuth: true}}

// tokenLabel returns the label that routes the operator's dashboard calls
// for a RayJob to head.
func tokenLabel(t *testing.T, head raytest.Head) (string, string) {
	t.Helper()
	v, err := cluster.DashboardLabelValue(head.DashboardURL())
	if err != nil {
		t.Fatal(err)
	}
	return cluster.DashboardLabel, v
}

// TestTokenAuthStepSucceeds: with token auth on, a whole step succeeds
// against the token head with the head's token (RAYSTEP_DASHBOARD_TOKEN,
// as a platform that fixes the token sets it). While the job runs, the
// Secret the RayJob's authOptions.secretName names holds the token and is
// owned by the RayJob, every Ray container of every pod gets
// RAY_AUTH_MODE=token and RAY_AUTH_TOKEN from it, and the operator's
// dashboard client, which reads the token from the Secret, sees the job
// RUNNING; after teardown the Secret is gone with the RayJob, and the
// token appears nowhere in raystep's output, the namespace's events or
// the operator's log.
func TestTokenAuthStepSucceeds(t *testing.T) {
	t.Parallel()
	setup(t)
	head := tokenRay.Head(t)
	ns := namespace(t, "e2e-token")
	release := filepath.Join(t.TempDir(), "release")
	s := spec(t, fmt.Sprintf(`spec.entrypoint=python -c "import os, time; [time.sleep(0.05) for _ in iter(lambda: os.path.exists('%s'), True)]; print('released')"`, release))
	b := backend(t, s, ns, nil, nil)
	b.Profile = tokenProfile(shared.profile)
	b.Dashboard = kuberay.DashboardOptions{URL: head.DashboardURL(), Token: head.Token()}
	key, value := tokenLabel(t, head)
	b.Customize = func(j *rayv1.RayJob) { j.Labels[key] = value }
	out := &syncBuffer{}
	b.Notify = func(level, msg string) { fmt.Fprintf(out, "notify %s %s\n", level, msg) }
	r := newRunner(t, b)
	r.Stdout = out
	r.Events = runner.SinkFunc(func(e runner.Event) { fmt.Fprintf(out, "%s %s: %s %v\n", e.Phase, e.Kind, e.Message, e.Attrs) })
	st := step(b.Spec, runID(t))
	st = runner.Resolve(st, nil)
	secretName := kuberay.AuthSecretName(st.ID)

	type result struct {
		res runner.Result
		err error
	}
	done := make(chan result, 1)
	go func() { res, err := r.Run(t.Context(), st); done <- result{res, err} }()
	job := awaitJobStatus(t, ns, st.ID, rayv1.JobStatusRunning, done)
	if got := job.Spec.RayClusterSpec.AuthOptions; got == nil || got.Mode != rayv1.AuthModeToken || got.SecretName == nil || *got.SecretName != secretName {
		t.Errorf("RayJob authOptions %+v, want mode token, secretName %s", got, secretName)
	}
	checkSecret(t, ns, secretName, job, head.Token())
	checkPodsEnv(t, ns, job.Status.RayClusterName, secretName)
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.res.Job.Status != runner.StatusSucceeded {
		t.Fatalf("step = %s, %v; want SUCCEEDED\n%s", got.res.Job.Status, got.err, out.String())
	}
	if !strings.Contains(out.String(), "released") {
		t.Errorf("the job's log did not reach stdout:\n%s", out.String())
	}
	awaitSecretGone(t, ns, secretName)
	nothingLeft(t, ns)
	noToken(t, ns, head.Token(), map[string]string{"raystep's output": out.String()})
	d := got.res.Durations
	t.Logf("FIGURES token auth step: provision %s, dashboard %s, run %s, teardown %s",
		d[runner.PhaseProvision], d[runner.PhaseDashboard], d[runner.PhaseRun], d[runner.PhaseTeardown])
}

// TestTokenAuthWrongTokenBinary: the built raystep, under Dagster Pipes,
// with token auth on and no RAYSTEP_DASHBOARD_TOKEN, makes a fresh token
// for its Secret; a head that runs with another token refuses it (Ray
// answers 403 to a wrong token, 401 to none), and the step fails with
// that status and the advice, exit 3, after deleting the RayJob and with
// it the Secret. Neither token appears in its output or Pipes messages.
func TestTokenAuthWrongTokenBinary(t *testing.T) {
	t.Parallel()
	setup(t)
	head := tokenRay.Head(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-token-wrong")
	secrets := watchSecrets(t, ns)
	s := newDagsterStep(t, bin, ns)
	key, value := tokenLabel(t, head)
	s.env = append(s.env, "RAYSTEP_PROFILE="+tokenProfileFile(t, map[string]string{key: value}),
		"RAYSTEP_DASHBOARD_URL="+head.DashboardURL())
	p := s.start(t)
	if code := p.wait(t, 4*time.Minute); code != 3 {
		t.Fatalf("raystep exited %d, want 3\n%s", code, p.out.String())
	}
	output := p.out.String()
	t.Logf("raystep's output:\n%s", output)
	want := "refused raystep's token (HTTP 403"
	if !strings.Contains(output, want) || !strings.Contains(output, kuberay.AuthSecretName(s.id)) {
		t.Errorf("output lacks %q naming Secret %s:\n%s", want, kuberay.AuthSecretName(s.id), output)
	}
	awaitSecretGone(t, ns, kuberay.AuthSecretName(s.id))
	nothingLeft(t, ns)
	made := secrets.tokens(t)
	if len(made) != 1 || made[0] == "" || made[0] == head.Token() {
		t.Fatalf("the step's Secret held %d tokens, want one fresh one, not the head's", len(made))
	}
	messages, err := os.ReadFile(s.messages)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{made[0], head.Token()} {
		noToken(t, ns, tok, map[string]string{"raystep's output": output, "the Pipes messages": string(messages)})
	}
}

// tokenProfile returns a copy of p that turns token auth on.
func tokenProfile(p *schemas.Profile) *schemas.Profile {
	c := *p
	c.Spec.RayAuth = schemas.RayAuth{Mode: schemas.RayAuthToken}
	return &c
}

// tokenProfileFile writes the example profile with token auth on and
// labels added to every RayJob, and returns its path.
func tokenProfileFile(t *testing.T, labels map[string]string) string {
	t.Helper()
	data, err := os.ReadFile("../../../examples/platform.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	spec := doc["spec"].(map[string]any)
	spec["rayAuth"] = map[string]any{"mode": "token"}
	all, _ := spec["labels"].(map[string]any)
	if all == nil {
		all = map[string]any{}
	}
	for k, v := range labels {
		all[k] = v
	}
	spec["labels"] = all
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "platform.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// awaitJobStatus waits by watch until the RayJob name in ns reports the
// Ray job status want (which only the operator's dashboard calls learn),
// failing the test if the step ends first or after a bound that only
// catches a hang.
func awaitJobStatus[T any](t *testing.T, ns, name string, want rayv1.JobStatus, stepDone <-chan T) *rayv1.RayJob {
	t.Helper()
	c, err := kuberay.NewClients(shared.k8s.Config, kuberay.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	w, err := c.Ray.RayV1().RayJobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last rayv1.RayJobStatus
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("RayJob watch ended; last status %+v", last)
			}
			if job, ok := ev.Object.(*rayv1.RayJob); ok {
				last = job.Status
				if job.Status.JobStatus == want {
					return job
				}
			}
		case r := <-stepDone:
			t.Fatalf("the step ended (%+v) before RayJob %s reported %s; last status %+v", r, name, want, last)
		case <-ctx.Done():
			t.Fatalf("RayJob %s not %s after 3m; last status %+v", name, want, last)
		}
	}
}

// checkSecret checks the token Secret: the token, key auth_token, owned by
// job.
func checkSecret(t *testing.T, ns, name string, job *rayv1.RayJob, token string) {
	t.Helper()
	s := &corev1.Secret{}
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("token Secret: %v", err)
	}
	if string(s.Data[kuberay.AuthTokenKey]) != token {
		t.Errorf("Secret %s: %s is not the head's token", name, kuberay.AuthTokenKey)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != job.UID || s.OwnerReferences[0].Kind != "RayJob" {
		t.Errorf("Secret %s owners %+v, want RayJob %s (%s)", name, s.OwnerReferences, job.Name, job.UID)
	}
}

// checkPodsEnv checks that every container of the RayCluster's pods,
// init containers included, has RAY_AUTH_MODE=token and RAY_AUTH_TOKEN
// from the Secret.
func checkPodsEnv(t *testing.T, ns, rayCluster, secret string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := shared.k8s.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"ray.io/cluster": rayCluster}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) < 2 {
		t.Fatalf("%d pods of RayCluster %s, want a head and a worker", len(pods.Items), rayCluster)
	}
	for _, pod := range pods.Items {
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			mode, token := "", ""
			for _, e := range c.Env {
				switch {
				case e.Name == "RAY_AUTH_MODE":
					mode = e.Value
				case e.Name == "RAY_AUTH_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					token = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
				}
			}
			if mode != "token" || token != secret+"/"+kuberay.AuthTokenKey {
				t.Errorf("pod %s container %s: RAY_AUTH_MODE=%q, RAY_AUTH_TOKEN from %q; want token, from %s/%s",
					pod.Name, c.Name, mode, token, secret, kuberay.AuthTokenKey)
			}
		}
	}
}

// awaitSecretGone waits by watch until the garbage collector deleted the
// Secret, failing the test after a bound that only catches a hang.
func awaitSecretGone(t *testing.T, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	secrets := shared.k8s.Clientset.CoreV1().Secrets(ns)
	for {
		list, err := secrets.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 0 {
			return
		}
		w, err := secrets.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			t.Fatal(err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("Secret %s/%s still exists after 1m: the garbage collector did not delete it with its RayJob", ns, name)
		}
	}
}

// secretWatch records the tokens of the Secrets created in a namespace.
type secretWatch struct {
	mu     sync.Mutex
	seen   []string
	closed bool // the watch ended before the test stopped it
}

// watchSecrets starts watching the Secrets of ns before anything of the
// test is created there.
func watchSecrets(t *testing.T, ns string) *secretWatch {
	t.Helper()
	w, err := shared.k8s.Clientset.CoreV1().Secrets(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sw := &secretWatch{}
	stopped, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stopped); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*corev1.Secret); ok && ev.Type == watch.Added {
				sw.mu.Lock()
				sw.seen = append(sw.seen, string(s.Data[kuberay.AuthTokenKey]))
				sw.mu.Unlock()
			}
		}
		select {
		case <-stopped:
		default:
			sw.mu.Lock()
			sw.closed = true
			sw.mu.Unlock()
		}
	}()
	return sw
}

// tokens returns the tokens of the Secrets created so far.
func (w *secretWatch) tokens(t *testing.T) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		t.Errorf("the Secret watch ended early: cannot tell which Secrets were created")
	}
	return append([]string(nil), w.seen...)
}

// noToken fails the test if token appears in any of outputs, in the
// namespace's events or in the operator's log.
func noToken(t *testing.T, ns, token string, outputs map[string]string) {
	t.Helper()
	if token == "" {
		t.Fatal("no token to look for")
	}
	events := &corev1.EventList{}
	if err := shared.k8s.Client.List(context.Background(), events, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, e := range events.Items {
		fmt.Fprintln(&text, e.Reason, e.Message)
	}
	all := map[string]string{"the events of " + ns: text.String()}
	for k, v := range outputs {
		all[k] = v
	}
	if log, err := os.ReadFile(filepath.Join(shared.k8s.LogDir, "kuberay-operator.log")); err == nil {
		all["the operator's log"] = string(log)
	}
	for where, s := range all {
		if strings.Contains(s, token) {
			t.Errorf("the token appears in %s", where)
		}
	}
	if len(events.Items) == 0 {
		t.Logf("no events in %s", ns)
	}
}
