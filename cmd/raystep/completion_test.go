package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/fleet"
)

// TestCompleteClusters: what the shell is offered for down, dashboard,
// notebook and run --cluster (cobra's __complete, which the completion
// scripts run on Tab): the interactive clusters of the command's backend
// in its namespace, never a step's or a run's cluster; for down each
// name once however many are typed, for the others one name at all; for
// notebook only the clusters with a notebook.
func TestCompleteClusters(t *testing.T) {
	t.Parallel()
	var scopes []fleet.Scope
	fleets := []fleet.Fleet{&fakeFleet{list: func(s fleet.Scope) ([]fleet.Record, error) {
		scopes = append(scopes, s)
		return []fleet.Record{
			{Backend: fleet.BackendKubeRay, Namespace: "ml", Name: "raystep-train-0a1b2c3d4e5f", ClusterKind: fleet.KindStep},
			{Backend: fleet.BackendKubeRay, Namespace: "ml", Name: "erin-dev", ClusterKind: fleet.KindInteractive, Deployment: "ready", GPUsHeld: "a100-80gb=2", Owner: "erin", Notebook: true},
			{Backend: fleet.BackendKubeRay, Namespace: "ml", Name: "raystep-run-5d6e", ClusterKind: fleet.KindRun},
			{Backend: fleet.BackendLocal, Name: "alice-dev", ClusterKind: fleet.KindInteractive, Deployment: "ready", Owner: "alice"},
			{Backend: fleet.BackendLocal, Name: "bob-dev", ClusterKind: fleet.KindInteractive, Deployment: "expired", Owner: "bob"},
			// An annotation anyone who can edit the cluster writes: a newline in it
			// must not add an offer of its own.
			{Backend: fleet.BackendKubeRay, Namespace: "ml", Name: "mallory-dev", ClusterKind: fleet.KindInteractive, Deployment: "ready", GPUsHeld: "t4=1\nrm -rf ~\t"},
		}, nil
	}}}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"down", ""}, []string{"alice-dev\tready, owner alice", "bob-dev\texpired, owner bob"}},
		{[]string{"down", "bob-dev", ""}, []string{"alice-dev\tready, owner alice"}},
		{[]string{"down", "--backend", "kuberay", "-n", "ml", ""}, []string{"erin-dev\tready, a100-80gb=2, owner erin, namespace ml", "mallory-dev\tready, t4=1 rm -rf ~ , namespace ml"}},
		{[]string{"dashboard", ""}, []string{"alice-dev\tready, owner alice", "bob-dev\texpired, owner bob"}},
		{[]string{"dashboard", "alice-dev", ""}, nil},
		{[]string{"notebook", ""}, nil},
		{[]string{"notebook", "--backend", "kuberay", ""}, []string{"erin-dev\tready, a100-80gb=2, owner erin, namespace ml"}},
		{[]string{"run", "-f", "train.yaml", "--cluster", ""}, []string{"alice-dev\tready, owner alice", "bob-dev\texpired, owner bob"}},
	} {
		code, out, stderr := runFleets(t, fleets, append([]string{"__complete"}, tc.args...)...)
		got, directive := offers(out)
		if code != 0 || directive != ":4" || !cmp.Equal(got, tc.want) {
			t.Errorf("raystep __complete %s: exit %d, offers %q with directive %s, want %q with :4 (no files)\n%s",
				strings.Join(tc.args, " "), code, got, directive, tc.want, stderr)
		}
	}
	if scopes[2].Namespace != "ml" {
		t.Errorf("down -n ml looked in %+v, want namespace ml", scopes[2])
	}
}

// TestCompleteClustersGivesUpInTime: a backend that does not answer (an
// API server gone quiet) is asked under a deadline, and a failed lookup
// offers nothing and tells the shell so, rather than hold it up.
func TestCompleteClustersGivesUpInTime(t *testing.T) {
	t.Parallel()
	var deadline bool
	quiet := listFunc(func(ctx context.Context, _ fleet.Scope) ([]fleet.Record, error) {
		_, deadline = ctx.Deadline()
		return nil, errors.New("dial tcp 10.0.0.1:6443: i/o timeout")
	})
	code, out, _ := runFleets(t, []fleet.Fleet{quiet}, "__complete", "down", "")
	got, directive := offers(out)
	if code != 0 || len(got) != 0 || directive != ":5" || !deadline {
		t.Errorf("a failed lookup: exit %d, offers %q, directive %s, under a deadline %v; want 0, none, :5 (error, no files), true", code, got, directive, deadline)
	}
}

// listFunc is a fleet whose List is the function itself.
type listFunc func(context.Context, fleet.Scope) ([]fleet.Record, error)

func (f listFunc) List(ctx context.Context, s fleet.Scope) ([]fleet.Record, error) { return f(ctx, s) }
func (listFunc) GC(context.Context, fleet.Scope, fleet.GCOptions, func(string)) error {
	return fleet.ErrNotHere
}
func (listFunc) DownRun(context.Context, fleet.Scope, string, func(string)) error {
	return fleet.ErrNotHere
}

// offers splits __complete's output into its offers and its last line,
// the directive (":4").
func offers(out string) ([]string, string) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 {
		return nil, ""
	}
	got := lines[:len(lines)-1]
	if len(got) == 0 {
		got = nil
	}
	return got, lines[len(lines)-1]
}

// TestCompleteKubeContexts: --context offers the kubeconfig's contexts,
// with their cluster and namespace and which is current, from the file
// alone (its API servers do not exist).
func TestCompleteKubeContexts(t *testing.T) {
	t.Parallel()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: prod-gpu, cluster: {server: "https://192.0.2.1:6443"}}, {name: dev, cluster: {server: "https://192.0.2.2:6443"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: prod, context: {cluster: prod-gpu, user: u, namespace: ml-ads}}, {name: dev, context: {cluster: dev, user: u}}]
current-context: dev
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runFleets(t, nil, "__complete", "--kubeconfig", kubeconfig, "ls", "--context", "")
	got, directive := offers(out)
	want := []string{"dev\tcluster dev (current)", "prod\tcluster prod-gpu, namespace ml-ads"}
	if code != 0 || directive != ":4" || !cmp.Equal(got, want) {
		t.Errorf("--context offers %q (exit %d, directive %s), want %q\n%s", got, code, directive, want, stderr)
	}
}

// TestCompletionScripts: every shell's script asks raystep (__complete),
// and a shell raystep has no script for is a usage error naming those it
// has. In-process: the bash script itself runs in a real bash in
// testdata/script/completion.txtar.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, stderr := runFleets(t, nil, "completion", shell)
		if code != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("raystep completion %s: exit %d, a script that asks __complete %v\n%s", shell, code, strings.Contains(out, "__complete"), stderr)
		}
	}
	for _, args := range [][]string{{"completion", "tcsh"}, {"completion"}, {"completion", "bash", "zsh"}} {
		code, out, stderr := runFleets(t, nil, args...)
		if code != 2 || out != "" || !strings.Contains(stderr, "completion: name one shell: bash, zsh, fish, powershell (got ") {
			t.Errorf("raystep %s: exit %d, stdout %q, stderr %q; want exit 2 naming the shells", strings.Join(args, " "), code, out, stderr)
		}
	}
}
