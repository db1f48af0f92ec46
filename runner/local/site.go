package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// notebookWait bounds the wait until a notebook answers: its job may
// install the profile's packages first.
const notebookWait = 10 * time.Minute

// Site is this machine as raystep's commands see it: the private heads it
// keeps for people (up, down, dashboard, notebook) and the place a step
// runs (Place). Its interactive clusters are detached private heads,
// recorded in the state dir, named, owned and expiring as a KubeRay
// interactive cluster is. Their dashboards and notebooks listen on this
// machine's loopback already: dashboard and notebook print their address
// and return, there is no forward to hold.
type Site struct {
	// Open returns the recorded clusters, started with raystep's ray and
	// logger; an error when there is no state dir.
	Open func() (*Clusters, error)
	// StateDir is where Open's clusters are recorded.
	StateDir func() (string, error)
	// RayBin is the ray a step's private head is started with; empty
	// lets rayhead find it.
	RayBin func() (string, error)
	// Given reports whether the command was given a flag, by its long
	// name: the flags that shape Kubernetes pods are refused, not
	// dropped, so nobody believes they got what they did not get.
	Given func(flag string) bool
	// Address and DashboardURL name an existing cluster a step runs on
	// instead of a private head (RAY_ADDRESS, RAY_API_SERVER_ADDRESS,
	// RAYSTEP_DASHBOARD_URL); Tokens are where its token is found.
	Address, DashboardURL string
	Tokens                TokenSources
	// Logger logs the heads' starts and stops.
	Logger *zap.Logger
	// UserAgent is sent to the dashboards.
	UserAgent string
	// LookupEnv reads raystep's environment, which a private head
	// inherits (spec.cluster.secretEnv); nil means os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	fleet.Streams
}

var _ fleet.Keeper = (*Site)(nil)

func (s *Site) given(flag string) bool { return s.Given != nil && s.Given(flag) }

// refuse returns the usage error of the first flag in flags that cmd was
// given.
func (s *Site) refuse(cmd, why string, flags ...string) error {
	for _, f := range flags {
		if s.given(f) {
			return fleet.Usage(fmt.Sprintf("%s: --%s %s", cmd, f, why))
		}
	}
	return nil
}

// PrivateHeadSupported says whether this system can run a private local
// head: rayhead finds and reaps a head's processes through Linux's /proc
// and pidfds. Elsewhere only a cluster that exists already (RAY_ADDRESS,
// RAYSTEP_DASHBOARD_URL) or the KubeRay backend can run a step.
func PrivateHeadSupported() error {
	if runtime.GOOS == "linux" {
		return nil
	}
	return fleet.Usage(fmt.Sprintf("--backend local starts a private Ray head on Linux only, not on %s: "+
		"use --backend kuberay, or name a running Ray cluster with RAY_ADDRESS", runtime.GOOS))
}

// Up starts a detached private head on this machine (Clusters.Up), or
// moves the expiry of the live one of that name. Every flag is checked
// before anything starts; --cpus is the head's logical CPU count, and a
// -f SPEC gives the name and owner only.
func (s *Site) Up(ctx context.Context, req fleet.UpRequest) error {
	if err := s.refuse("up", "has no meaning on the local backend, whose cluster is one private ray head on this machine: "+
		"drop it, or use --backend kuberay", "gpu", "workers", "memory", "namespace"); err != nil {
		return err
	}
	if err := PrivateHeadSupported(); err != nil {
		return err
	}
	cpus, err := headCPUs(req)
	if err != nil {
		return err
	}
	ttl, err := req.Lifetime()
	if err != nil {
		return err
	}
	idle, err := req.Idleness(ttl)
	if err != nil {
		return err
	}
	spec, err := req.Spec(ctx, false)
	if err != nil {
		return err
	}
	c, err := s.Open()
	if err != nil {
		return err
	}
	c.Head.NumCPUs = cpus
	if c.Head.RayBin, err = rayhead.FindRay(c.Head.RayBin); err != nil {
		return fmt.Errorf("up: %w", err) // before anything is recorded
	}
	if req.File != "" {
		fmt.Fprintf(s.Err, "note: the cluster section of %s is not used on the local backend: "+
			"the cluster is one private ray head on this machine\n", req.File)
		if names := s.unsetSecrets(spec.Spec.Cluster.SecretEnv); names != "" {
			fmt.Fprintf(s.Err, "note: spec.cluster.secretEnv: %s not set in raystep's environment, "+
				"which the head and its jobs get on the local backend\n", names)
		}
	}
	name, owner := spec.Metadata.Name, spec.Metadata.Owner
	if err := s.announce(c, name, owner, ttl); err != nil {
		return err
	}
	in, started, err := c.Up(ctx, UpOptions{Name: name, Owner: owner, TTL: ttl, Idle: localIdle(idle)})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if !started {
		fmt.Fprintf(s.Err, "Local cluster %s was running: expiry moved to %s, the rest of it left as it is\n",
			in.Name, in.Expires.Format(time.RFC3339))
	}
	s.printUp(in, ttl)
	if !req.Notebook {
		return nil
	}
	return s.upNotebook(ctx, in, req.Profile)
}

// headCPUs is --cpus as the head's logical CPU count (ray start
// --num-cpus); 0, Ray's own count of this machine's CPUs, without it.
func headCPUs(req fleet.UpRequest) (int, error) {
	if req.Given == nil || !req.Given("cpus") {
		return 0, nil
	}
	n, err := strconv.Atoi(req.CPUs)
	if err != nil || n < 1 {
		return 0, fleet.Usage(fmt.Sprintf("up: --cpus %q: on the local backend, the head's logical CPU count: "+
			"want a whole number of at least 1", req.CPUs))
	}
	return n, nil
}

// announce says what up is about to do with the cluster name, and
// refuses (exit 2) to extend a live cluster of another owner.
func (s *Site) announce(c *Clusters, name, owner string, ttl time.Duration) error {
	cur, err := c.Get(name)
	if err == nil && cur.Status == StatusRunning {
		if cur.Owner != owner {
			return fleet.Usage(fmt.Sprintf("up: local cluster %s belongs to %s, not %s: pick another --name", name, cur.Owner, owner))
		}
		fmt.Fprintf(s.Err, "Local cluster %s runs: moving its expiry to %s from now\n", name, ttl)
		return nil
	}
	fmt.Fprintf(s.Err, "Local cluster %s: starting a private ray head on this machine (owner %s, ttl %s)\n", name, owner, ttl)
	return nil
}

// printUp tells the user the running cluster's name, dashboard and how
// to use it.
func (s *Site) printUp(in Interactive, ttl time.Duration) {
	w := s.Out
	fmt.Fprintf(w, "Local cluster %s is ready; it expires %s (in %s).\n", in.Name, in.Expires.Format(time.RFC3339), ttl)
	fmt.Fprintf(w, "Dashboard: %s (token in %s)\n", in.DashboardURL, in.TokenFile)
	fmt.Fprintf(w, "Use it:\n  raystep run --cluster %s -f step.yaml\n", in.Name)
	fmt.Fprintf(w, "  or, for ray.init() and Ray's own tools on this machine:\n    export %s\n", strings.Join(in.Env(), " "))
	fmt.Fprintf(w, "Stop it: raystep down %s (it stops itself at its expiry; raystep up --name %s --ttl DUR moves that)\n",
		in.Name, in.Name)
	if in.IdleSeconds > 0 {
		fmt.Fprintf(w, "It also stops itself once idle for %s: no Ray job but its notebook's running, no notebook kernel busy.\n",
			time.Duration(in.IdleSeconds)*time.Second)
	}
}

// Down checks every name and finds every cluster first, stopping nothing
// when one is missing, then stops them one by one, each returning once its
// processes are gone. A cluster that already stopped (expired, or its head
// died) only has what is left of it cleared away. Local clusters have no
// namespace.
func (s *Site) Down(ctx context.Context, names []string, gone func(string)) error {
	if s.given("namespace") {
		return &fleet.UnsupportedError{Command: "down", Flag: "--namespace", Backend: "local", Hint: "drop it, or use --backend kuberay"}
	}
	for _, n := range names {
		if err := CheckName(n); err != nil {
			return fmt.Errorf("down: %w", fleet.BadName(err.Error()))
		}
	}
	c, err := s.Open()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if _, err := c.Get(n); err != nil {
			errs = append(errs, fmt.Errorf("down: %w (raystep ls lists them)", err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range names {
		if err := c.Down(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("down: %w", err))
			continue
		}
		gone(fmt.Sprintf("Local cluster %s stopped", n))
	}
	return errors.Join(errs...)
}

// running returns the running local cluster name, for what (dashboard,
// notebook, ui): an unknown name is ErrNotFound, as for down.
func (s *Site) running(what, name string) (Interactive, error) {
	if err := CheckName(name); err != nil {
		return Interactive{}, fmt.Errorf("%s: %w", what, fleet.BadName(err.Error()))
	}
	if err := s.refuse(what, "is for the KubeRay backend: a local cluster listens on this machine already", "namespace", "port"); err != nil {
		return Interactive{}, err
	}
	dir, err := s.StateDir()
	if err != nil {
		return Interactive{}, fleet.Usage(err.Error())
	}
	in, err := (&Clusters{Dir: dir}).Get(name)
	if err != nil {
		return in, fmt.Errorf("%s: %w", what, err)
	}
	if in.Status != StatusRunning {
		return in, fleet.Usage(fmt.Sprintf("%s %s: the local cluster is %s, not running (raystep up --name %s starts it again)",
			what, name, in.Status, name))
	}
	return in, nil
}

// Dashboard prints the local cluster's dashboard and its token file.
func (s *Site) Dashboard(_ context.Context, name string, _ uint16) error {
	in, err := s.running("dashboard", name)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Out, in.DashboardURL)
	fmt.Fprintf(s.Err, "the dashboard asks for the head's token: export RAY_AUTH_TOKEN=$(cat %s)\n", in.TokenFile)
	return nil
}

// Notebook waits until the local cluster's notebook answers and prints
// its URL with its token.
func (s *Site) Notebook(ctx context.Context, name string, _ uint16) error {
	in, err := s.running("notebook", name)
	if err != nil {
		return err
	}
	nb, err := notebook.ReadFile(in.NotebookFile())
	if errors.Is(err, notebook.ErrNone) {
		return fmt.Errorf("notebook: local cluster %s has %w: raystep up --notebook --name %s starts one on it", name, notebook.ErrNone, name)
	}
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	st, err := s.starter(in, nil)
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	base := loopbackURL(nb.Port)
	wctx, cancel := context.WithTimeout(ctx, notebookWait)
	defer cancel()
	if err := st.Await(wctx, func(context.Context) (string, error) { return base, nil }, nb); err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	fmt.Fprintln(s.Out, nb.URL(base))
	return nil
}

// upNotebook starts the notebook on the ready cluster in (or finds the
// one that runs there), on a free port of this machine's loopback, and
// waits until it answers. As on KubeRay, a notebook that does not start
// fails up but leaves the cluster. Its record (port and token, 0600)
// lives in the head's temp dir, which the head's supervisor removes when
// the head stops: a stopped cluster leaves no notebook token behind.
func (s *Site) upNotebook(ctx context.Context, in Interactive, profile *schemas.Profile) error {
	p := profile.Spec.Interactive.Notebook
	path := in.NotebookFile()
	nb, err := notebook.ReadFile(path)
	if errors.Is(err, notebook.ErrNone) {
		if nb, err = notebook.NewServer(p); err == nil {
			// Not the profile's port: clusters on one machine share its
			// loopback, and a fixed port would let only one have a notebook.
			if nb.Port, err = notebook.LoopbackPort(); err == nil {
				err = notebook.WriteFile(path, nb)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	st, err := s.starter(in, &p)
	if err == nil {
		err = notebook.WriteToken(st.TokenFile, nb.Token)
	}
	// A port free when it was chosen may be another program's by now (a
	// notebook job that ended let it go), and Jupyter would fail on it on
	// every later up: a notebook that does not run moves to a free port.
	if err == nil && !loopbackPortFree(nb.Port) {
		var running bool
		if running, err = st.Running(ctx); err == nil && !running {
			taken := nb.Port
			if nb.Port, err = notebook.LoopbackPort(); err == nil {
				err = notebook.WriteFile(path, nb)
			}
			if err == nil {
				fmt.Fprintf(s.Err, "notebook: port %d is taken by another program: the notebook moves to port %d\n", taken, nb.Port)
			}
		}
	}
	if err == nil {
		var started bool
		if started, err = st.Start(ctx, nb); err == nil && started {
			fmt.Fprintf(s.Err, "notebook job %s submitted: waiting until it answers\n", st.SubmissionID())
		}
	}
	if err == nil {
		base := loopbackURL(nb.Port)
		wctx, cancel := context.WithTimeout(ctx, notebookWait)
		err = st.Await(wctx, func(context.Context) (string, error) { return base, nil }, nb)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("up --notebook: %w (the cluster stays: raystep down %s stops it)", err, in.Name)
	}
	fmt.Fprintf(s.Out, "Notebook: raystep notebook %s (prints its URL with its token)\n", in.Name)
	return nil
}

// starter is a notebook.Starter on the local cluster's Jobs API.
func (s *Site) starter(in Interactive, p *schemas.NotebookProfile) (*notebook.Starter, error) {
	token, err := ReadToken(in.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("read the token of local cluster %s from %s: %w", in.Name, in.TokenFile, err)
	}
	c, err := raysubmit.New(raysubmit.Config{BaseURL: in.DashboardURL, Token: token, UserAgent: s.UserAgent})
	if err != nil {
		return nil, err
	}
	st := &notebook.Starter{Ray: c, Cluster: in.Name, TokenFile: filepath.Join(in.TempDir, "raystep-notebook-token")}
	if p != nil {
		st.Pip = p.Pip
	}
	return st, nil
}

// Head returns the dashboard and token of the running local cluster or
// step named by r, for `raystep ui`.
func (s *Site) Head(r fleet.Record) (url, token string, err error) {
	if r.ClusterKind == fleet.KindStep {
		return s.stepHead(r.Name)
	}
	in, err := s.running("ui", r.Name)
	if err != nil {
		return "", "", err
	}
	if token, err = ReadToken(in.TokenFile); err != nil {
		return "", "", fmt.Errorf("read the token of local cluster %s from %s: %w", in.Name, in.TokenFile, err)
	}
	return in.DashboardURL, token, nil
}

// stepHead reaches the private head of the running local step id.
func (s *Site) stepHead(id string) (url, token string, err error) {
	dir, err := s.StateDir()
	if err != nil {
		return "", "", err
	}
	steps, err := ListSteps(StepsDir(dir))
	if err != nil {
		return "", "", err
	}
	for _, st := range steps {
		if st.ID != id {
			continue
		}
		if token, err = ReadToken(st.TokenFile); err != nil {
			return "", "", fmt.Errorf("read the token of local step %s from %s: %w", id, st.TokenFile, err)
		}
		return st.DashboardURL, token, nil
	}
	return "", "", fmt.Errorf("local step %s has ended: %w", id, fleet.ErrNotFound)
}

// ReadToken returns the first line of the token file at path, trimmed;
// an empty one is an error.
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if first = strings.TrimSpace(first); first == "" {
		return "", errors.New("the file is empty")
	}
	return first, nil
}

func loopbackURL(port int) string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// loopbackPortFree says whether nothing listens on port of 127.0.0.1.
func loopbackPortFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// Place builds the backend a step runs on and resolves the step for it
// (runner.Resolve), in one pass: the interactive cluster p.Cluster when
// given (borrowed, never stopped), else the existing cluster the
// environment names, else the run-scoped head of the step's Dagster run
// (spec.cluster.reuse: run), else a private head of its own. Nothing is
// started but a run-scoped head.
func (s *Site) Place(ctx context.Context, step runner.Step, p fleet.Placement) (runner.Step, runner.Backend, error) {
	if p.Cluster != "" {
		return s.borrow(step, p.Cluster)
	}
	bin, err := s.RayBin()
	if err != nil {
		return runner.Step{}, nil, err
	}
	b := &Backend{
		Address: s.Address, DashboardURL: s.DashboardURL,
		Head: rayhead.Options{RayBin: bin}, Logger: s.Logger,
	}
	if b.Address == "local" && b.DashboardURL == "" {
		// Ray's word for "start a new Ray on this machine, connect to no
		// other": ray.init() does, and so does a step, on a head of its own.
		b.Address = ""
		step.Notices = append(step.Notices, "RAY_ADDRESS=local names no existing cluster: the step starts a private ray head, as ray.init() starts a new one")
	}
	if b.Existing() {
		if err := CheckAddress(b.DashboardURL, b.Address); err != nil {
			return runner.Step{}, nil, fleet.Usage(err.Error())
		}
		if b.Token, b.TokenFrom, err = s.Tokens.Find(); err != nil {
			return runner.Step{}, nil, err
		}
		step.GPUType, step.GPUCount, step.Shape = "", 0, "existing ray cluster"
		if names := secretNames(p.Spec.Spec.Cluster.SecretEnv); names != "" {
			step.Notices = append(step.Notices, fmt.Sprintf("spec.cluster.secretEnv (%s) is not used on an existing cluster: "+
				"its driver and workers have the environment that cluster was started with", names))
		}
		if p.Spec.Spec.Cluster.Reuse == schemas.ReuseRun && step.Dagster.RunID != "" {
			step.Notices = append(step.Notices, "spec.cluster.reuse is run, but the step runs on an existing cluster already: it is used as is")
		}
		return runner.Resolve(step, nil), b, nil
	}
	if err := PrivateHeadSupported(); err != nil {
		return runner.Step{}, nil, err
	}
	dir, dirErr := s.StateDir()
	if dirErr == nil {
		b.Steps = StepsDir(dir) // without a home, ls and ui just do not see the step
	}
	step.GPUType, step.GPUCount, step.Shape = "", 0, "private ray head on this machine"
	if names := s.unsetSecrets(p.Spec.Spec.Cluster.SecretEnv); names != "" {
		step.Notices = append(step.Notices, fmt.Sprintf("spec.cluster.secretEnv: %s not set in raystep's environment, "+
			"which a private head's driver and workers get on the local backend: the job runs without it", names))
	}
	if step.Teardown != runner.TeardownAlways {
		step.Notices = append(step.Notices, fmt.Sprintf("teardown %q keeps nothing with a private local head: "+
			"the head belongs to this step and stops with it; set RAY_ADDRESS to run on a cluster that outlives the step",
			step.Teardown))
		step.Teardown = runner.TeardownAlways
	}
	if p.Spec.Spec.Cluster.Reuse == schemas.ReuseRun && step.Dagster.RunID != "" {
		if dirErr != nil {
			return runner.Step{}, nil, fleet.Usage(dirErr.Error())
		}
		step, err = s.runScoped(ctx, b, &Clusters{Dir: dir, Head: rayhead.Options{RayBin: bin, Logger: s.Logger}}, step, p.Spec)
	}
	return runner.Resolve(step, nil), b, err
}

// lookupEnv is s.LookupEnv, else os.LookupEnv.
func (s *Site) lookupEnv(name string) (string, bool) {
	if s.LookupEnv != nil {
		return s.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

// unsetSecrets lists the variables of entries that raystep's environment
// lacks, for a notice: "A, B"; "" when it has them all.
func (s *Site) unsetSecrets(entries []schemas.SecretEnv) string {
	var unset []schemas.SecretEnv
	for _, e := range entries {
		if _, ok := s.lookupEnv(e.Name); !ok {
			unset = append(unset, e)
		}
	}
	return secretNames(unset)
}

// secretNames lists the variables of entries, for a notice: "A, B".
func secretNames(entries []schemas.SecretEnv) string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return strings.Join(names, ", ")
}

// borrow runs the step on the running local interactive cluster name as
// on any existing cluster, which never stops it. RAY_ADDRESS and the
// other variables that name an existing cluster are not used: --cluster
// says which one. A name with no record is ErrNotFound and a cluster that
// no longer runs a usage error: exit 2, nothing started. A cluster that
// expires or goes while the step runs fails the step at once (exit 3).
func (s *Site) borrow(step runner.Step, name string) (runner.Step, runner.Backend, error) {
	if err := CheckName(name); err != nil {
		return runner.Step{}, nil, fmt.Errorf("run --cluster: %w", err)
	}
	c, err := s.Open()
	if err != nil {
		return runner.Step{}, nil, err
	}
	in, err := c.Get(name)
	if err != nil {
		return runner.Step{}, nil, fmt.Errorf("run --cluster: %w (raystep up --name %s starts it)", err, name)
	}
	if in.Status != StatusRunning {
		return runner.Step{}, nil, fleet.Usage(fmt.Sprintf("run --cluster %s: the local cluster is %s, not running "+
			"(raystep up --name %s starts it again)", name, in.Status, name))
	}
	token, err := ReadToken(in.TokenFile)
	if err != nil {
		return runner.Step{}, nil, fmt.Errorf("run --cluster %s: read the token of the local cluster from %s: %w",
			name, in.TokenFile, err)
	}
	b := &Backend{
		DashboardURL: in.DashboardURL, Token: token, TokenFrom: "the token file of local cluster " + name,
		Head: rayhead.Options{RayBin: c.Head.RayBin}, Logger: s.Logger,
		Lost: func(ctx context.Context) error { return c.Lost(ctx, name) },
	}
	step.GPUType, step.GPUCount = "", 0
	step.Shape = "local interactive cluster " + name
	step.Notices = append(step.Notices, fmt.Sprintf("runs on local interactive cluster %s (expires %s), which it borrows: "+
		"the step never stops it, and the spec's cluster section is not used", name, in.Expires.Format(time.RFC3339)))
	return runner.Resolve(step, nil), b, nil
}

// runScoped starts or attaches to the detached private head of the
// step's Dagster run and makes the step run on it as on an existing
// cluster, which the step leaves running. A private head is the same
// whatever the cluster section asks for (no pods, no GPUs), so the steps
// of a run share one whatever theirs say.
func (s *Site) runScoped(ctx context.Context, b *Backend, c *Clusters, step runner.Step, spec *schemas.Spec) (runner.Step, error) {
	name := runner.RunClusterName(step.Dagster.RunID, runner.ClusterHash(schemas.Cluster{}))
	in, token, started, err := c.UpRun(ctx, name, step.Dagster.RunID, spec.Spec.Timeouts.Run)
	if err != nil {
		return step, &runner.InfraError{Phase: runner.PhaseProvision, Err: err}
	}
	b.DashboardURL, b.Token, b.TokenFrom = in.DashboardURL, token, in.TokenFile
	step.Shape = "run-scoped private ray head " + in.Name
	how := "attached to"
	if started {
		how = "started"
	}
	step.Notices = append(step.Notices, fmt.Sprintf("%s the run-scoped private head %s of Dagster run %s at %s, expiring %s: "+
		"the step never stops it; raystep down --dagster-run-id %s does when the run ends",
		how, in.Name, step.Dagster.RunID, in.DashboardURL, in.Expires.Format(time.RFC3339), step.Dagster.RunID))
	return step, nil
}

// localIdle is how long a local head may be idle: it has no GPU workers
// apart from itself, so releasing them and deleting the cluster are one
// thing, the head's supervisor stopping it, at whichever comes first.
func localIdle(idle fleet.Idle) time.Duration {
	switch {
	case idle.Release > 0 && idle.Stop > 0:
		return min(idle.Release, idle.Stop)
	case idle.Release > 0:
		return idle.Release
	}
	return idle.Stop
}
