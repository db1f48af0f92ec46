package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/runner/kuberay"
)

// The least-privilege proofs that run the built raystep as someone the
// RBAC examples grant: a step of spec.cluster.reuse: run and the
// run-status sensor's down as rbacFile's ServiceAccount, and people's
// interactive clusters (up, run --cluster, notebook, dashboard, ls, gc,
// down) as peopleFile's group.

// peopleFile is the least-privilege example for people.
const peopleFile = "../../../examples/k8s/people.yaml"

// peopleRole is peopleFile, granted to the group ml-ads-engineers.
var peopleRole = roleFile{path: peopleFile, as: func(string) *rest.Config { return asPerson() }}

// asPerson is the admin config impersonating an engineer of the group
// peopleFile's RoleBinding names.
func asPerson() *rest.Config {
	cfg := rest.CopyConfig(shared.k8s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"ml-ads-engineers"}}
	return cfg
}

// kubeconfigAs writes the test cluster's kubeconfig with every user
// impersonating as cfg does, for the built raystep, and returns its path.
func kubeconfigAs(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(shared.k8s.KubeConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups = cfg.Impersonate.UserName, cfg.Impersonate.Groups
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// exitError is a built raystep's non-zero exit, with its output.
type exitError struct {
	code int
	out  string
}

func (e *exitError) Error() string { return fmt.Sprintf("raystep exited %d:\n%s", e.code, e.out) }

// outcomeErr is o as an action's error (nil on exit 0); notify, if set,
// gets every line of its output that speaks of a refusal.
func outcomeErr(o outcome, notify kuberay.Notify) error {
	out := o.stdout + o.stderr
	if notify != nil {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "forbidden") {
				notify("WARNING", line)
			}
		}
	}
	if o.code != 0 {
		return &exitError{code: o.code, out: out}
	}
	return nil
}

// runScopeAction runs a step of spec.cluster.reuse: run with the built
// binary as ns/raystep: the run's first step, or (attach) a later one,
// whose run's cluster a step run as the admin made.
type runScopeAction struct{ attach bool }

func (a runScopeAction) String() string {
	if a.attach {
		return "reuse: run step attaching"
	}
	return "reuse: run step creating"
}

func (a runScopeAction) do(t *testing.T, ns string, notify kuberay.Notify) error {
	t.Cleanup(func() { clearNamespace(t, ns) })
	bin, run, state := buildRaystep(t), runID(t), t.TempDir()
	if a.attach {
		first := runStep(t, bin, ns, run, "e2e/model", state).start(t)
		if code := first.wait(t, 5*time.Minute); code != 0 {
			t.Fatalf("the run's first step (as the admin) exited %d:\n%s", code, first.out.String())
		}
	}
	s := runStep(t, bin, ns, run, "e2e/auc", state)
	s.env = append(s.env, "KUBECONFIG="+kubeconfigAs(t, asServiceAccount(ns))) // the last one counts
	p := s.start(t)
	code := p.wait(t, 5*time.Minute)
	return outcomeErr(outcome{code: code, stdout: p.out.String()}, notify)
}

// downRunAction is the run-status sensor's `raystep down --dagster-run-id`
// as ns/raystep, on a run-scoped cluster the admin made.
type downRunAction struct{}

func (downRunAction) String() string { return "down --dagster-run-id" }

func (downRunAction) do(t *testing.T, ns string, notify kuberay.Notify) error {
	t.Cleanup(func() { clearNamespace(t, ns) })
	run := runID(t)
	rc, err := kuberay.BuildRunCluster(spec(t), shared.profile, ns, run, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.k8s.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	env := interactiveEnv(t, "KUBECONFIG="+kubeconfigAs(t, asServiceAccount(ns)), "XDG_STATE_HOME="+t.TempDir())
	return outcomeErr(raystepIn(t, env, "down", "-n", ns, "--backend", "kuberay", "--dagster-run-id", run), notify)
}

// personEnv is the built raystep's environment as the engineer, with the
// notebook profile (its server on the port kwok sends to the shared head).
func personEnv(t *testing.T, more ...string) []string {
	t.Helper()
	return append(interactiveEnv(t, "RAYSTEP_PROFILE="+notebookProfile(t), "KUBECONFIG="+kubeconfigAs(t, asPerson())), more...)
}

// personName is the interactive cluster the people actions use.
const personName = "alice-dev"

// upAsAdmin brings up personName in ns as the admin (with --notebook
// when notebook), for an action that needs it, and deletes it after the
// test. more holds the state dir the person shares (XDG_STATE_HOME=):
// up keeps the cluster's tokens there, as on the person's own machine.
func upAsAdmin(t *testing.T, ns string, notebook bool, more ...string) {
	t.Helper()
	args := []string{"up", "-n", ns, "--name", personName, "--owner", "alice", "--ttl", "1h"}
	if notebook {
		args = append(args, "--notebook")
	}
	t.Cleanup(func() { clearNamespace(t, ns) })
	mustRaystep(t, append(append(interactiveEnv(t), "RAYSTEP_PROFILE="+notebookProfile(t)), more...), args...)
}

// personAction is one raystep command as the engineer.
type personAction struct {
	// args follow the binary; "NS" is replaced by the namespace.
	args []string
	// cluster makes the admin bring personName up first.
	cluster bool
	// env is added to the environment.
	env []string
}

func (a personAction) String() string { return strings.Join(a.args, " ") }

func (a personAction) do(t *testing.T, ns string, notify kuberay.Notify) error {
	t.Cleanup(func() { clearNamespace(t, ns) })
	state := "XDG_STATE_HOME=" + t.TempDir()
	if a.cluster {
		upAsAdmin(t, ns, false, state)
	}
	args := make([]string, len(a.args))
	for i, s := range a.args {
		args[i] = strings.ReplaceAll(s, "NS", ns)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // dashboard and notebook hold on success
	defer cancel()
	return outcomeErr(raystepCtx(ctx, t, personEnv(t, append(a.env, state)...), args...), notify)
}

// The people actions: each command a person runs, on personName where
// it needs one. noWatchList turns client-go's streaming lists off, as
// against an API server without WatchList.
var (
	noWatchList    = []string{"KUBE_FEATURE_WatchListClient=false"}
	personUp       = personAction{args: []string{"up", "-n", "NS", "--name", personName, "--owner", "alice"}}
	personExtend   = personAction{args: []string{"up", "-n", "NS", "--name", personName, "--owner", "alice", "--ttl", "2h"}, cluster: true}
	personNotebook = personAction{args: []string{"up", "-n", "NS", "--name", personName, "--owner", "alice", "--notebook"}, cluster: true}
	personRun      = personAction{args: []string{"run", "--namespace", "NS", "-f", "testdata/step.yaml", "--cluster", personName}, cluster: true}
	personDown     = personAction{args: []string{"down", "-n", "NS", personName}, cluster: true}
	personLs       = personAction{args: []string{"ls", "-n", "NS"}}
	personGC       = personAction{args: []string{"gc", "-n", "NS"}}
	personDash     = personAction{args: []string{"dashboard", "-n", "NS", personName}, cluster: true}
)

// peopleLeastPrivilege is TestLeastPrivilegePeople's table: for every
// verb of every rule of peopleFile's Role, a command that needs it.
var peopleLeastPrivilege = []entry{
	{permission{"ray.io", "rayclusters", "create"}, personUp},
	{permission{"ray.io", "rayclusters", "watch"}, personUp},
	{permission{"ray.io", "rayclusters", "list"}, personLs},
	{permission{"ray.io", "rayclusters", "get"}, personDown},
	{permission{"ray.io", "rayclusters", "patch"}, personExtend},
	{permission{"ray.io", "rayclusters", "delete"}, personDown},
	{permission{"ray.io", "rayjobs", "list"}, personLs},
	{permission{"ray.io", "rayjobs", "create"}, personRun},
	{permission{"ray.io", "rayjobs", "watch"}, personRun},
	{permission{"ray.io", "rayjobs", "patch"}, personRun},  // spec.jobId
	{permission{"ray.io", "rayjobs", "delete"}, personRun}, // teardown
	{permission{"", "pods", "list"}, personDash},           // the running head
	{permission{"", "pods", "watch"}, personUp},
	{permission{"", "pods/portforward", "create"}, personDash},
	{permission{"", "events", "list"}, personAction{args: personUp.args, env: noWatchList}},
	{permission{"", "events", "watch"}, personUp},
	{permission{"", "secrets", "create"}, personNotebook}, // NAME-notebook; no get: up keeps the tokens on the person's machine
	{permission{"coordination.k8s.io", "leases", "create"}, personRun},
	{permission{"coordination.k8s.io", "leases", "patch"}, personAction{args: append(append([]string(nil), personRun.args...), "--set", endless),
		cluster: true, env: []string{"RAYSTEP_HEARTBEAT_INTERVAL=1s"}}},
	{permission{"coordination.k8s.io", "leases", "list"}, personGC},
}

// TestLeastPrivilegePeople proves examples/k8s/people.yaml both ways, as
// an engineer of its group (impersonated, RBAC enforced by the API
// server): with the whole Role up --notebook, run --cluster, notebook
// and dashboard (held, then Ctrl-C), ls, gc and down all succeed without
// a permission warning; without any one verb of any rule, the command
// that needs it fails at once (exit 3) with the API server's words for
// that verb alone.
func TestLeastPrivilegePeople(t *testing.T) {
	t.Parallel()
	proveLeastPrivilege(t, peopleRole, peopleLeastPrivilege, []action{lifecycleAction{}, lifecycleAction{noWatchList: true}})
}

// lifecycleAction is an engineer's whole day with an interactive cluster
// as the engineer: up --notebook, run --cluster, notebook and dashboard
// (until Ctrl-C), ls, gc, down.
type lifecycleAction struct{ noWatchList bool }

func (a lifecycleAction) String() string {
	if a.noWatchList {
		return "up, run --cluster, notebook, dashboard, ls, gc, down with no watch-list"
	}
	return "up, run --cluster, notebook, dashboard, ls, gc, down"
}

func (a lifecycleAction) do(t *testing.T, ns string, notify kuberay.Notify) error {
	t.Cleanup(func() { clearNamespace(t, ns) })
	var more []string
	if a.noWatchList {
		more = noWatchList
	}
	env := personEnv(t, more...)
	name := personName + map[bool]string{false: "-nb", true: "-nb-list"}[a.noWatchList] // the notebook job's name on the shared head
	takeNotebookPort(t, name)
	steps := [][]string{
		{"up", "-n", ns, "--name", name, "--owner", "alice", "--ttl", "1h", "--notebook"},
		{"run", "--namespace", ns, "-f", "testdata/step.yaml", "--cluster", name},
		{"notebook", "-n", ns, name},
		{"dashboard", "-n", ns, name},
		{"ls", "-n", ns},
		{"gc", "-n", ns},
		{"down", "-n", ns, name},
	}
	for _, args := range steps {
		var o outcome
		if args[0] == "notebook" || args[0] == "dashboard" {
			o = holdThenInterrupt(t, env, args...)
		} else {
			o = raystepIn(t, env, args...)
		}
		if err := outcomeErr(o, notify); err != nil {
			return fmt.Errorf("raystep %s: %w", strings.Join(args, " "), err)
		}
		if args[0] == "up" {
			checkTokenHint(t, ns, name, o.stdout)
		}
	}
	nothingLeft(t, ns)
	return nil
}

// holdThenInterrupt runs dashboard or notebook until it printed its URL,
// then sends it SIGINT, as Ctrl-C does, and returns how it ended.
func holdThenInterrupt(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(buildRaystep(t), args...)
	cmd.Env = env
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			_ = cmd.Process.Kill()
		}
	}()
	defer close(done)
	url, _ := bufio.NewReader(out).ReadString('\n') // "" and EOF when it exits first
	if url != "" {
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	_ = cmd.Wait()
	o := outcome{code: cmd.ProcessState.ExitCode(), stdout: url, stderr: stderr.String()}
	t.Logf("raystep %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), o.code, o.stdout, o.stderr)
	return o
}

// checkTokenHint: up's output tells the person how to give Ray's tools
// the cluster's token without reading the Secret, which they may not:
// RAY_AUTH_TOKEN_PATH names a file of theirs holding the Secret's token.
func checkTokenHint(t *testing.T, ns, name, stdout string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^    export RAY_AUTH_TOKEN_PATH=(\S+)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Errorf("up printed no RAY_AUTH_TOKEN_PATH to export:\n%s", stdout)
		return
	}
	kept, err := os.ReadFile(m[1])
	if err != nil {
		t.Errorf("the token file up names: %v", err)
		return
	}
	var secret corev1.Secret
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: kuberay.AuthSecretName(name)}, &secret); err != nil {
		t.Fatal(err)
	}
	if string(kept) != string(secret.Data[kuberay.AuthTokenKey]) || len(kept) == 0 {
		t.Errorf("%s holds another token than Secret %s/%s", m[1], ns, kuberay.AuthSecretName(name))
	}
	if st, err := os.Stat(m[1]); err == nil && st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", m[1], st.Mode().Perm())
	}
}
