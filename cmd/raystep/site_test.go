package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sethvargo/go-envconfig"
	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// fakeSite is a site of function fields, as runner's fakes are; a nil
// field fails the test that reaches it.
type fakeSite struct {
	t         *testing.T
	up        func(fleet.UpRequest) error
	down      func(names []string, gone func(string)) error
	dashboard func(name string, port uint16) error
	notebook  func(name string, port uint16) error
	place     func(runner.Step, fleet.Placement) (runner.Step, runner.Backend, error)
}

func (f *fakeSite) missing(what string) error {
	f.t.Errorf("the backend was asked to %s", what)
	return errors.New("unexpected " + what)
}

func (f *fakeSite) Up(_ context.Context, req fleet.UpRequest) error {
	if f.up == nil {
		return f.missing("up")
	}
	return f.up(req)
}

func (f *fakeSite) Down(_ context.Context, names []string, gone func(string)) error {
	if f.down == nil {
		return f.missing("down")
	}
	return f.down(names, gone)
}

func (f *fakeSite) Dashboard(_ context.Context, name string, port uint16) error {
	if f.dashboard == nil {
		return f.missing("reach a dashboard")
	}
	return f.dashboard(name, port)
}

func (f *fakeSite) Notebook(_ context.Context, name string, port uint16) error {
	if f.notebook == nil {
		return f.missing("reach a notebook")
	}
	return f.notebook(name, port)
}

func (f *fakeSite) Place(_ context.Context, step runner.Step, p fleet.Placement) (runner.Step, runner.Backend, error) {
	if f.place == nil {
		return step, nil, f.missing("place a step")
	}
	return f.place(step, p)
}

// runSite runs raystep with args and env against s instead of the
// backend, and returns its exit code, stdout and stderr, and the
// commands that asked for a site with what they named themselves.
func runSite(t *testing.T, s *fakeSite, env map[string]string, args ...string) (int, string, string, []string) {
	t.Helper()
	var out, errOut bytes.Buffer
	var asked []string
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, lookup: envconfig.MapLookuper(env),
		newSite: func(cmd *cobra.Command, what string) (site, error) {
			asked = append(asked, cmd.Name()+": "+what)
			return s, nil
		}}
	code := a.main(context.Background(), args)
	return code, out.String(), errOut.String(), asked
}

// TestUpHandsTheFlagsToTheKeeper: up gives the backend every flag as
// given (which ones were, too), the profile and the owner the
// environment names, and maps what the backend answers to exit codes.
func TestUpHandsTheFlagsToTheKeeper(t *testing.T) {
	t.Parallel()
	var got fleet.UpRequest
	s := &fakeSite{t: t, up: func(req fleet.UpRequest) error { got = req; return nil }}
	code, _, errOut, asked := runSite(t, s, map[string]string{"USER": "alice"},
		"up", "--name", "alice-dev", "--gpu", "l4", "--workers", "2", "--ttl", "2h", "--notebook", "--set", "spec.cluster.image=x")
	if code != 0 {
		t.Fatalf("up: exit %d: %s", code, errOut)
	}
	if diff := cmp.Diff([]string{"up: up"}, asked); diff != "" {
		t.Errorf("sites asked (-want +got):\n%s", diff)
	}
	var given []string
	for _, f := range []string{"name", "gpu", "workers", "cpus", "memory", "namespace", "ttl", "notebook", "file", "owner"} {
		if got.Given(f) {
			given = append(given, f)
		}
	}
	owner, from, err := got.DefaultOwner()
	want := []any{"alice-dev", "l4", int32(2), 2 * time.Hour, true, []string{"spec.cluster.image=x"}, "builtin",
		[]string{"name", "gpu", "workers", "ttl", "notebook"}, "alice", "$USER alice", nil}
	have := []any{got.Name, got.GPU, got.Workers, got.TTL, got.Notebook, got.Set, got.Profile.Metadata.Name,
		given, owner, from, err}
	if diff := cmp.Diff(want, have, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("name, gpu, workers, ttl, notebook, set, profile, flags given, default owner (-want +got):\n%s", diff)
	}

	// What the keeper answers decides the exit code.
	for _, tt := range []struct {
		err  error
		code int
		help bool
	}{
		{fleet.Usage("up: --gpu has no meaning on the local backend"), exitUsage, true},
		{&schemas.ValidationErrors{Errors: []schemas.FieldError{{File: "--gpu h200", Pointer: "/", Message: "unknown gpuType"}}}, exitUsage, false},
		{errors.New("RayCluster ml/alice-dev: not ready within timeouts.provision (15m0s)"), exitInfrastructure, false},
	} {
		s := &fakeSite{t: t, up: func(fleet.UpRequest) error { return tt.err }}
		code, out, errOut, _ := runSite(t, s, nil, "up")
		if code != tt.code || out != "" || !strings.Contains(errOut, tt.err.Error()) ||
			strings.Contains(errOut, "raystep up --help") != tt.help {
			t.Errorf("keeper says %q: exit %d, stdout %q, stderr %q; want %d", tt.err, code, out, errOut, tt.code)
		}
	}

	// Bad usage never reaches the keeper.
	for _, args := range [][]string{{"up", "extra"}, {"up", "--workers", "two"}, {"up", "--profile", "/nonexistent.yaml"}} {
		if code, _, errOut, _ := runSite(t, &fakeSite{t: t}, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}

// TestDownAsksTheKeeper: down hands every name to the backend's keeper
// and prints each cluster it says is gone; a name the backend does not
// have is the user's mistake (exit 2), a failure to delete is exit 3, and
// a flag the backend has no use for is refused before anything is asked.
func TestDownAsksTheKeeper(t *testing.T) {
	t.Parallel()
	var asked []string
	gone := &fakeSite{t: t, down: func(names []string, gone func(string)) error {
		asked = append(asked, names...)
		for _, n := range names {
			gone("RayCluster ml/" + n + " deleted")
		}
		return nil
	}}
	code, out, errOut, _ := runSite(t, gone, nil, "down", "alice-dev", "bob-eval")
	if code != 0 || out != "RayCluster ml/alice-dev deleted\nRayCluster ml/bob-eval deleted\n" {
		t.Errorf("down alice-dev bob-eval: exit %d, %q (%s)", code, out, errOut)
	}
	if diff := cmp.Diff([]string{"alice-dev", "bob-eval"}, asked); diff != "" {
		t.Errorf("names the keeper got (-want +got):\n%s", diff)
	}
	missing := &fakeSite{t: t, down: func([]string, func(string)) error {
		return fmt.Errorf("down: RayCluster ml/nobody: %w", fleet.NotFound("not a raystep interactive cluster"))
	}}
	if code, _, errOut, _ := runSite(t, missing, nil, "down", "nobody"); code != exitUsage || !strings.Contains(errOut, "not a raystep interactive cluster") {
		t.Errorf("down of a name the backend lacks: exit %d, %q; want 2", code, errOut)
	}
	failing := &fakeSite{t: t, down: func([]string, func(string)) error { return errors.New("down: delete RayCluster ml/dev: forbidden") }}
	if code, _, _, _ := runSite(t, failing, nil, "down", "dev"); code != exitInfrastructure {
		t.Errorf("down that fails to delete: exit %d, want 3", code)
	}
	for _, args := range [][]string{{"down"}, {"down", "dev", "--dagster-run-id", "r1"}} {
		if code, _, errOut, _ := runSite(t, &fakeSite{t: t}, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errOut)
		}
	}

	// The real factory: the local backend refuses --namespace before it
	// looks at anything, and an unknown backend is refused.
	code, _, errOut = runTest(t, map[string]string{"RAYSTEP_BACKEND": "local"}, "down", "-n", "ml", "dev")
	if want := "down: --namespace has no meaning on the local backend: drop it, or use --backend kuberay"; code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("down -n on the local backend: exit %d, %q; want 2 and %q", code, errOut, want)
	}
	if code, _, errOut := runTest(t, nil, "down", "--backend", "slurm", "dev"); code != exitUsage || !strings.Contains(errOut, `--backend "slurm"`) {
		t.Errorf("down --backend slurm: exit %d, %q; want 2", code, errOut)
	}
}

// TestDownRunAsksEveryFleet: down --dagster-run-id asks every backend for
// the run's clusters in the namespace given, prints each one gone, says
// so when there were none, and fails (exit 3) when a backend fails, after
// asking the others.
func TestDownRunAsksEveryFleet(t *testing.T) {
	t.Parallel()
	var asked []string
	deletes := func(lines ...string) *fakeFleet {
		return &fakeFleet{downRun: func(s fleet.Scope, runID string, gone func(string)) error {
			asked = append(asked, s.Namespace+" "+runID)
			for _, l := range lines {
				gone(l)
			}
			return nil
		}}
	}
	kube, mine := deletes("RayCluster ml/ray-run-r1-0a1b deleted"), deletes("private head ray-run-r1-ffff deleted")
	code, out, errOut := runFleets(t, []fleet.Fleet{kube, &fakeFleet{}, mine}, "down", "--dagster-run-id", "r1", "-n", "ml")
	if code != 0 || out != "RayCluster ml/ray-run-r1-0a1b deleted\nprivate head ray-run-r1-ffff deleted\n" {
		t.Errorf("down --dagster-run-id r1: exit %d, %q (%s)", code, out, errOut)
	}
	if diff := cmp.Diff([]string{"ml r1", "ml r1"}, asked); diff != "" {
		t.Errorf("scope and run id each fleet got (-want +got):\n%s", diff)
	}
	code, out, _ = runFleets(t, []fleet.Fleet{deletes(), &fakeFleet{}}, "down", "--dagster-run-id", "r2")
	if want := "Dagster run r2 has no run-scoped clusters: nothing to delete\n"; code != 0 || out != want {
		t.Errorf("down --dagster-run-id of a run without clusters: exit %d, %q; want 0, %q", code, out, want)
	}
	broken := &fakeFleet{downRun: func(fleet.Scope, string, func(string)) error { return errors.New("list RayClusters: forbidden") }}
	code, out, errOut = runFleets(t, []fleet.Fleet{broken, mine}, "down", "--dagster-run-id", "r1")
	if code != exitInfrastructure || out != "private head ray-run-r1-ffff deleted\n" || !strings.Contains(errOut, "forbidden") {
		t.Errorf("down --dagster-run-id with a failing backend: exit %d, %q, %q; want 3, the other's line, the reason", code, out, errOut)
	}
}

// TestReachAsksTheKeeper: dashboard and notebook hand the name and port
// to the backend; a cluster the backend lacks, or one without a notebook,
// is the user's mistake (exit 2).
func TestReachAsksTheKeeper(t *testing.T) {
	t.Parallel()
	var got []string
	s := &fakeSite{t: t,
		dashboard: func(name string, port uint16) error {
			got = append(got, fmt.Sprint("dashboard ", name, " ", port))
			return nil
		},
		notebook: func(name string, port uint16) error {
			got = append(got, fmt.Sprint("notebook ", name, " ", port))
			return nil
		},
	}
	for _, args := range [][]string{{"dashboard", "alice-dev"}, {"dashboard", "alice-dev", "--port", "9000"}, {"notebook", "bob", "-n", "ml"}} {
		if code, _, errOut, _ := runSite(t, s, nil, args...); code != 0 {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
	if diff := cmp.Diff([]string{"dashboard alice-dev 0", "dashboard alice-dev 9000", "notebook bob 0"}, got); diff != "" {
		t.Errorf("what the keeper was asked (-want +got):\n%s", diff)
	}
	lacks := &fakeSite{t: t,
		dashboard: func(name string, _ uint16) error {
			return fmt.Errorf("dashboard: %w", fleet.NotFound("no cluster "+name))
		},
		notebook: func(name string, _ uint16) error {
			return fmt.Errorf("notebook: cluster %s has %w", name, notebook.ErrNone)
		},
	}
	for _, args := range [][]string{{"dashboard", "nobody"}, {"notebook", "bob"}, {"notebook"}, {"dashboard", "a", "b"}, {"notebook", "bob", "--port", "x"}} {
		if code, out, errOut, _ := runSite(t, lacks, nil, args...); code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q (%s); want 2 and nothing on stdout", args, code, out, errOut)
		}
	}
}

// TestRunPlacesTheStepOnce: run asks the backend to place the step with
// the spec, the profile and the cluster it borrows, once, and a backend
// that refuses (a cluster it does not have) fails the step before
// anything runs: exit 2.
func TestRunPlacesTheStepOnce(t *testing.T) {
	t.Parallel()
	var placed []string
	s := &fakeSite{t: t, place: func(step runner.Step, p fleet.Placement) (runner.Step, runner.Backend, error) {
		placed = append(placed, fmt.Sprintf("%s on %s, profile %s", step.Name, p.Cluster, p.Profile.Metadata.Name))
		return step, nil, fmt.Errorf("run --cluster: %w", fleet.NotFound("no interactive cluster "+p.Cluster))
	}}
	code, out, errOut, asked := runSite(t, s, nil, "run", "-f", train, "--cluster", "alice-dev", "--profile", platform)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "no interactive cluster alice-dev") {
		t.Errorf("run --cluster on a cluster the backend lacks: exit %d, stdout %q, stderr %q; want 2", code, out, errOut)
	}
	if diff := cmp.Diff([]string{"ads-ranking-train on alice-dev, profile ml-platform"}, placed); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"run: run --backend kuberay"}, asked); diff != "" {
		t.Errorf("sites asked (-want +got):\n%s", diff)
	}
	code, _, errOut, _ = runSite(t, &fakeSite{t: t}, nil, "run", "-f", train, "--cluster", "dev", "--set", "spec.cluster.reuse=run")
	if code != exitUsage || !strings.Contains(errOut, "spec.cluster.reuse is run") {
		t.Errorf("run --cluster with reuse run: exit %d, %q; want 2 before anything is placed", code, errOut)
	}
}
