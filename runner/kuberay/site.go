package kuberay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// Bounds of the waits of Site's commands.
const (
	// upTeardownTimeout bounds deleting a cluster up created and then
	// gave up on (not ready, or cancelled).
	upTeardownTimeout = 2 * time.Minute
	// dashboardWait bounds the wait until the Ray dashboard answers
	// through the port-forward `raystep dashboard` opened.
	dashboardWait = 2 * time.Minute
	// notebookWait bounds the wait until a notebook answers: its job may
	// install the profile's packages first.
	notebookWait = 10 * time.Minute
)

// Site is a Kubernetes namespace as raystep's commands see it: the
// interactive RayClusters it keeps for people (up, down, dashboard,
// notebook) and the place a step's RayJob runs (Place). Nothing is sent
// to the API server before a command's own checks pass.
type Site struct {
	// Connect reaches the API server.
	Connect func() (*Clients, error)
	// Profile returns the platform profile.
	Profile func() (*schemas.Profile, error)
	// Namespace is --namespace and EnvNamespace $RAYSTEP_NAMESPACE; the
	// spec's, the profile's and the kubeconfig's follow them
	// (ResolveNamespace).
	Namespace, EnvNamespace string
	// DashboardOptions is how the clusters' dashboards are reached; its
	// InCluster allows the head service's DNS name when raystep also
	// talks to the API server as its pod's service account.
	DashboardOptions DashboardOptions
	// UnschedulableGrace, HeartbeatInterval and PortForwardGiveUp are
	// the Backend's and Interactive's.
	UnschedulableGrace, HeartbeatInterval, PortForwardGiveUp time.Duration
	// KeepDir is Interactive.KeepDir.
	KeepDir string
	// UserAgent is sent to the dashboards.
	UserAgent string
	// Now is the time up's expiry counts from; nil means time.Now.
	Now func() time.Time
	fleet.Streams

	notices     Notify
	noticesOnce sync.Once
}

var _ fleet.Keeper = (*Site)(nil)

// notify prints what the watches report on Err (Lines).
func (s *Site) notify(level, msg string) {
	s.noticesOnce.Do(func() { s.notices = Lines(s.Err) })
	s.notices(level, msg)
}

// Lines is a Notify that prints each report on w, one line each, from
// any goroutine; a warning's line starts "warning: ".
func Lines(w io.Writer) Notify {
	var mu sync.Mutex
	return func(level, msg string) {
		mu.Lock()
		defer mu.Unlock()
		if level == "WARNING" {
			msg = "warning: " + msg
		}
		fmt.Fprintln(w, msg)
	}
}

func (s *Site) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// inCluster says whether the head service's DNS name reaches dashboards.
func (s *Site) inCluster(c *Clients) bool { return c.InCluster && s.DashboardOptions.InCluster }

// namespace resolves the namespace for a spec's (or "").
func (s *Site) namespace(c *Clients, profile *schemas.Profile, spec string) string {
	return ResolveNamespace(Namespaces{Flag: s.Namespace, Env: s.EnvNamespace, Spec: spec,
		Profile: profile.Namespace(), Kubeconfig: c.Namespace})
}

func (s *Site) interactive(c *Clients) *Interactive {
	return &Interactive{Kube: c.Kube, Ray: c.Ray, KeepDir: s.KeepDir, Notify: s.notify,
		Token: s.DashboardOptions.Token, UnschedulableGrace: s.UnschedulableGrace}
}

// Up makes the RayCluster of the request (flags over -f SPEC's cluster
// section, everything else from the profile exactly as for a step), or
// moves the expiry of the live one of that name, waits by watch until
// every pod runs and tells the user how to use it. A cluster it created
// that never got ready, or whose wait a signal cut short, is deleted
// before it returns.
func (s *Site) Up(ctx context.Context, req fleet.UpRequest) error {
	ttl, err := req.Lifetime()
	if err != nil {
		return err
	}
	idle, err := req.Idleness(ttl)
	if err != nil {
		return err
	}
	spec, err := req.Spec(ctx, true)
	if err != nil {
		return err
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(s.Err, w.Error())
	}
	clients, err := s.Connect()
	if err != nil {
		return err
	}
	ns := s.namespace(clients, req.Profile, spec.Metadata.Namespace)
	now := s.now()
	rc, err := BuildCluster(spec, req.Profile, ns, now.Add(ttl))
	if err != nil {
		return err
	}
	SetIdle(rc.Annotations, idle, now)
	i := s.interactive(clients)
	upped, err := i.Up(ctx, rc)
	if upped.Created && upped.Cluster.UID != "" {
		fmt.Fprintf(s.Err, "RayCluster %s/%s created (%s), expires %s: waiting until it is ready\n",
			ns, rc.Name, spec.Spec.Cluster.Shape(), rc.Annotations[AnnotationExpires])
	}
	if err == nil {
		err = s.awaitUp(ctx, i, &upped, spec.Spec.Timeouts.Provision)
	}
	if err != nil {
		if upped.Created {
			return s.undoUp(ctx, i, upped.Cluster, err)
		}
		return err
	}
	s.printUp(i, clients, upped, ttl)
	if !req.Notebook {
		return nil
	}
	return s.upNotebook(ctx, &reached{i: i, clients: clients, rc: upped.Cluster}, req.Profile)
}

// awaitUp waits until the cluster is ready, at most timeouts.provision,
// and keeps the ready RayCluster in upped.
func (s *Site) awaitUp(ctx context.Context, i *Interactive, upped *Upped, timeout time.Duration) error {
	await := i.AwaitReady
	switch {
	case upped.Restored:
		fmt.Fprintf(s.Err, "RayCluster %s/%s exists: expiry moved from %s to %s; bringing back the GPU workers idle release gave back\n",
			upped.Cluster.Namespace, upped.Cluster.Name, upped.Previous, upped.Cluster.Annotations[AnnotationExpires])
		await = i.AwaitWorkers
	case !upped.Created:
		fmt.Fprintf(s.Err, "RayCluster %s/%s exists: expiry moved from %s to %s, the rest of it left as it is\n", upped.Cluster.Namespace,
			upped.Cluster.Name, upped.Previous, upped.Cluster.Annotations[AnnotationExpires])
	}
	late := fmt.Errorf("RayCluster %s/%s: not ready within timeouts.provision (%s)", upped.Cluster.Namespace, upped.Cluster.Name, timeout)
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, late)
	defer cancel()
	rc, err := await(wctx, upped.Cluster)
	if err != nil {
		return err
	}
	upped.Cluster = rc
	return nil
}

// undoUp deletes the cluster up created and gave up on, within
// upTeardownTimeout (a second signal stops waiting), and returns cause
// with the delete's error, if any.
func (s *Site) undoUp(ctx context.Context, i *Interactive, rc *rayv1.RayCluster, cause error) error {
	err := fleet.Undo(ctx, upTeardownTimeout, func(dctx context.Context) error { return i.Delete(dctx, rc.Namespace, rc.Name, rc.UID) })
	if err != nil {
		return errors.Join(cause, fmt.Errorf("delete the RayCluster up created: %w", err))
	}
	fmt.Fprintf(s.Err, "RayCluster %s/%s deleted\n", rc.Namespace, rc.Name)
	return cause
}

// printUp tells the user the ready cluster's name, dashboard and how to
// use it.
func (s *Site) printUp(i *Interactive, c *Clients, upped Upped, ttl time.Duration) {
	rc := upped.Cluster
	w := s.Out
	url := s.DashboardOptions.URL
	if url == "" {
		url = ClusterDashboardURL(rc)
	}
	fmt.Fprintf(w, "RayCluster %s/%s is ready; it expires %s (in %s).\n", rc.Namespace, rc.Name, rc.Annotations[AnnotationExpires], ttl)
	fmt.Fprintf(w, "Dashboard: %s\n", url)
	if s.DashboardOptions.URL == "" && !s.inCluster(c) {
		fmt.Fprintf(w, "  from outside the cluster: kubectl port-forward -n %s svc/%s %d:%d, then http://127.0.0.1:%d\n",
			rc.Namespace, headService(rc), 8265, 8265, 8265)
	}
	fmt.Fprintf(w, "Use it:\n  RAY_ADDRESS=%s ray job submit --working-dir . -- python train.py\n", url)
	if export := rayTokenExport(i, rc); export != "" {
		fmt.Fprintf(w, "  with the cluster's Ray token (Secret %s/%s):\n    %s\n", rc.Namespace, upped.Secret, export)
	}
	fmt.Fprintf(w, "  raystep run --backend kuberay --namespace %s --cluster %s -f step.yaml\n", rc.Namespace, rc.Name)
	fmt.Fprintf(w, "Delete it: raystep down %s -n %s (raystep gc deletes it once it expired)\n", rc.Name, rc.Namespace)
	if idle := IdleOf(rc); idle != (fleet.Idle{}) {
		var acts []string
		if idle.Release > 0 {
			acts = append(acts, fmt.Sprintf("after %s it releases its GPU workers (raystep up %s -n %s brings them back)", idle.Release, rc.Name, rc.Namespace))
		}
		if idle.Stop > 0 {
			acts = append(acts, fmt.Sprintf("after %s raystep gc deletes it", idle.Stop))
		}
		fmt.Fprintf(w, "Idle (no Ray job but its notebook's, no notebook kernel busy): %s.\n", strings.Join(acts, "; "))
	}
}

// headService names the head service of rc.
func headService(rc *rayv1.RayCluster) string {
	if s := rc.Status.Head.ServiceName; s != "" {
		return s
	}
	return rc.Name + "-head-svc"
}

// rayTokenExport is the shell command that gives Ray's tools the token of
// rc: the copy up kept on this machine (its file, readable by the user
// only), else the Secret, for whoever may read it; "" without token auth.
func rayTokenExport(i *Interactive, rc *rayv1.RayCluster) string {
	if rc.Spec.AuthOptions == nil || rc.Spec.AuthOptions.Mode != rayv1.AuthModeToken || rc.Spec.AuthOptions.SecretName == nil {
		return ""
	}
	if kept := i.KeptPath(rc, KeptRayToken); kept != "" {
		return "export RAY_AUTH_TOKEN_PATH=" + shellQuote(kept)
	}
	return fmt.Sprintf("export RAY_AUTH_TOKEN=$(kubectl get secret -n %s %s -o jsonpath='{.data.%s}' | base64 -d)",
		rc.Namespace, *rc.Spec.AuthOptions.SecretName, AuthTokenKey)
}

// shellQuote returns s as one word of a POSIX shell: as it is when it
// holds only characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%,=", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkName refuses a name no RayCluster can have.
func checkName(what, name string) error {
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return fleet.BadName(fmt.Sprintf("%s: %q is not a cluster name: %s", what, name, strings.Join(msgs, "; ")))
	}
	return nil
}

// Down checks the names, finds every cluster, then deletes them all at
// once and waits for each; a step's cluster or anyone else's RayCluster is
// never touched (ErrNotInteractive).
func (s *Site) Down(ctx context.Context, names []string, gone func(string)) error {
	for _, n := range names {
		if err := checkName("down", n); err != nil {
			return err
		}
	}
	i, _, ns, err := s.connect()
	if err != nil {
		return err
	}
	var found []*rayv1.RayCluster
	var errs []error
	for _, n := range names {
		rc, err := i.Find(ctx, ns, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("down: %w", err))
			continue
		}
		found = append(found, rc)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	errs = make([]error, len(found))
	var wg sync.WaitGroup
	var mu sync.Mutex // the lines of the deletes that end together
	for j, rc := range found {
		wg.Go(func() {
			if errs[j] = i.Delete(ctx, rc.Namespace, rc.Name, rc.UID); errs[j] == nil {
				_ = i.Forget(rc.Namespace, rc.Name) // the tokens of a cluster that is gone
				mu.Lock()
				defer mu.Unlock()
				gone(fmt.Sprintf("RayCluster %s/%s deleted", rc.Namespace, rc.Name))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// connect reaches the API server for the interactive clusters of the
// namespace the flags, environment, profile or kubeconfig name.
func (s *Site) connect() (*Interactive, *Clients, string, error) {
	profile, err := s.Profile()
	if err != nil {
		return nil, nil, "", err
	}
	clients, err := s.Connect()
	if err != nil {
		return nil, nil, "", err
	}
	return s.interactive(clients), clients, s.namespace(clients, profile, ""), nil
}

// reached is an interactive cluster found for dashboard or notebook.
type reached struct {
	i       *Interactive
	clients *Clients
	rc      *rayv1.RayCluster
}

// find checks the name and finds the cluster.
func (s *Site) find(ctx context.Context, what, name string) (*reached, error) {
	if err := checkName(what, name); err != nil {
		return nil, err
	}
	i, clients, ns, err := s.connect()
	if err != nil {
		return nil, err
	}
	rc, err := i.Find(ctx, ns, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &reached{i: i, clients: clients, rc: rc}, nil
}

// Dashboard opens a port-forward from 127.0.0.1:port (0: a free port) to
// the cluster's dashboard, prints its URL once the dashboard answers
// through it, and holds it until ctx ends. With a dashboard URL of the
// platform's, or in the cluster, it prints the address and returns.
func (s *Site) Dashboard(ctx context.Context, name string, port uint16) error {
	r, err := s.find(ctx, "dashboard", name)
	if err != nil {
		return err
	}
	if url := s.DashboardOptions.URL; url != "" || s.inCluster(r.clients) {
		if url == "" {
			url = ClusterDashboardURL(r.rc)
		}
		fmt.Fprintln(s.Out, url)
		return nil
	}
	fwd, err := r.i.ForwardHead(ctx, r.clients.Config, r.rc, port, DashboardPort(r.rc))
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	defer fwd.Close()
	if err := s.awaitDashboard(ctx, fwd.URL); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("dashboard: the Ray dashboard of %s/%s does not answer through the port-forward to pod %s: %w",
			r.rc.Namespace, r.rc.Name, fwd.Pod, err)
	}
	fmt.Fprintln(s.Out, fwd.URL)
	if export := rayTokenExport(r.i, r.rc); export != "" {
		fmt.Fprintf(s.Err, "the dashboard asks for the Ray token: %s\n", export)
	}
	fmt.Fprintf(s.Err, "port-forward to pod %s/%s open: Ctrl-C closes it\n", r.rc.Namespace, fwd.Pod)
	return s.hold(ctx, fwd, "dashboard")
}

// awaitDashboard waits, for at most dashboardWait, until the Ray dashboard
// at url answers GET /api/version; any HTTP answer counts (under token
// auth it is 401). The URL is printed only then: the first connection
// through a fresh port-forward can find it broken (the forward then opens
// again on the same port), and a person's first page load should not be
// the one that does.
func (s *Site) awaitDashboard(ctx context.Context, url string) error {
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url, UserAgent: s.UserAgent})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, dashboardWait)
	defer cancel()
	_, err = c.Version(wctx)
	var refused *raysubmit.APIError
	if err == nil || errors.As(err, &refused) || errors.Is(err, raysubmit.ErrNotFound) {
		return nil
	}
	return err
}

// hold waits until ctx ends (Ctrl-C, SIGTERM: a clean end) or the
// forward breaks (an error).
func (s *Site) hold(ctx context.Context, fwd *HeadForward, what string) error {
	select {
	case <-ctx.Done():
		fwd.Close()
		fmt.Fprintln(s.Err, "port-forward closed")
		return nil
	case <-fwd.Done():
		return fmt.Errorf("%s: the port-forward to pod %s ended: %v (run the command again)", what, fwd.Pod, fwd.Err())
	}
}

// Notebook opens a port-forward from 127.0.0.1:port to the Jupyter
// server up --notebook started on the head, waits until it answers,
// prints its URL with its token and holds the forward until ctx ends.
func (s *Site) Notebook(ctx context.Context, name string, port uint16) error {
	r, err := s.find(ctx, "notebook", name)
	if err != nil {
		return err
	}
	nb, err := r.i.ReadNotebook(ctx, r.rc)
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	st, closeRay, err := s.starter(ctx, r, nil)
	if err != nil {
		return fmt.Errorf("notebook: %w", err)
	}
	defer closeRay()
	rf := &reforward{r: r, local: port, remote: uint16(nb.Port)}
	defer rf.close()
	wctx, cancel := context.WithTimeout(ctx, notebookWait)
	defer cancel()
	if err := st.Await(wctx, rf.base, nb); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C while waiting: nothing is left open
		}
		return fmt.Errorf("notebook: %w", err)
	}
	fwd := rf.fwd
	fmt.Fprintln(s.Out, nb.URL(fwd.URL))
	fmt.Fprintf(s.Err, "port-forward to pod %s/%s open: Ctrl-C closes it\n", r.rc.Namespace, fwd.Pod)
	return s.hold(ctx, fwd, "notebook")
}

// starter is a notebook.Starter on the dashboard of r's cluster, reached
// as Dashboard reaches it, and the function that closes its
// port-forward, if any.
func (s *Site) starter(ctx context.Context, r *reached, p *schemas.NotebookProfile) (*notebook.Starter, func(), error) {
	c, done, err := r.i.dashboardClient(ctx, s.DashboardOptions, s.UserAgent, r.clients, r.rc)
	if err != nil {
		return nil, nil, err
	}
	st := &notebook.Starter{Ray: c, Cluster: r.rc.Name}
	if p != nil {
		st.Pip = p.Pip
	}
	return st, done, nil
}

// upNotebook starts the notebook on the ready cluster (or finds the one
// that runs there), waits until it answers through a port-forward and
// tells the user how to reach it. A notebook that does not start fails up
// but leaves the cluster, which is ready and usable, for down to delete.
func (s *Site) upNotebook(ctx context.Context, r *reached, profile *schemas.Profile) error {
	p := profile.Spec.Interactive.Notebook
	fresh, err := notebook.NewServer(p)
	if err != nil {
		return err
	}
	nb, err := r.i.KeepNotebook(ctx, r.rc, fresh)
	if err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	st, closeRay, err := s.starter(ctx, r, &p)
	if err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	defer closeRay()
	started, err := st.Start(ctx, nb)
	if err != nil {
		return fmt.Errorf("up --notebook: %w (the cluster stays: raystep down %s deletes it)", err, r.rc.Name)
	}
	if started {
		fmt.Fprintf(s.Err, "notebook job %s submitted: waiting until it answers\n", st.SubmissionID())
	}
	rf := &reforward{r: r, remote: uint16(nb.Port)}
	wctx, cancel := context.WithTimeout(ctx, notebookWait)
	err = st.Await(wctx, rf.base, nb)
	cancel()
	rf.close()
	if err != nil {
		return fmt.Errorf("up --notebook: %w (the cluster stays: raystep down %s deletes it)", err, r.rc.Name)
	}
	if err := r.i.MarkNotebook(ctx, r.rc, nb); err != nil {
		return fmt.Errorf("up --notebook: %w", err)
	}
	fmt.Fprintf(s.Out, "Notebook: raystep notebook %s -n %s (prints its URL with its token, and holds the port-forward)\n", r.rc.Name, r.rc.Namespace)
	return nil
}

// reforward is a port-forward to the notebook's port that base opens
// again, on the same local port, when it ended for good. (A HeadForward
// opens itself again when the head refuses a connection, as it does until
// the server listens; it ends only when it cannot.)
type reforward struct {
	r             *reached
	local, remote uint16
	fwd           *HeadForward
}

// base returns the URL of a working forward, opening one if needed.
func (f *reforward) base(ctx context.Context) (string, error) {
	if f.fwd != nil {
		select {
		case <-f.fwd.Done():
			f.fwd = nil
		default:
			return f.fwd.URL, nil
		}
	}
	fwd, err := f.r.i.ForwardHead(ctx, f.r.clients.Config, f.r.rc, f.local, f.remote)
	if err != nil {
		return "", err
	}
	f.fwd = fwd
	if u, err := url.Parse(fwd.URL); err == nil {
		if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
			f.local = uint16(p) // the URL printed stays the same
		}
	}
	return fwd.URL, nil
}

// close closes the forward, if any.
func (f *reforward) close() {
	if f.fwd != nil {
		f.fwd.Close()
	}
}

// Place builds the step's Backend and resolves the step for it
// (runner.Resolve) in one pass: its namespace (flag, environment, spec,
// profile, kubeconfig), and whether its RayJob makes a cluster of its
// own, borrows the interactive cluster p.Cluster, or borrows the
// run-scoped cluster of its Dagster run (spec.cluster.reuse: run), made
// or attached to here. Only that last one is created before the runner
// runs.
func (s *Site) Place(ctx context.Context, step runner.Step, p fleet.Placement) (runner.Step, runner.Backend, error) {
	clients, err := s.Connect()
	if err != nil {
		return runner.Step{}, nil, err
	}
	step.Namespace = s.namespace(clients, p.Profile, p.Spec.Metadata.Namespace)
	step = runner.Resolve(step, nil)
	if p.Cluster == "" { // a borrowed cluster was made as it was
		for _, w := range p.Spec.Warnings {
			step.Notices = append(step.Notices, w.Error())
		}
	}
	b := s.backend(clients, p.Spec, p.Profile)
	switch {
	case p.Cluster != "":
		err = s.borrow(ctx, b, &step, p.Cluster)
	case p.Spec.Spec.Cluster.Reuse == schemas.ReuseRun && step.Dagster.RunID != "":
		err = s.runScoped(ctx, b, &step, p.Spec, p.Profile)
	}
	return step, b, err
}

// backend is the step's Backend on clients for one spec's cluster.
func (s *Site) backend(c *Clients, spec *schemas.Spec, profile *schemas.Profile) *Backend {
	d := s.DashboardOptions
	d.InCluster = s.inCluster(c)
	return &Backend{
		Kube: c.Kube, Ray: c.Ray, Config: c.Config, Spec: spec, Profile: profile, Dashboard: d,
		UnschedulableGrace: s.UnschedulableGrace, HeartbeatInterval: s.HeartbeatInterval, PortForwardGiveUp: s.PortForwardGiveUp,
	}
}

// borrow points b at the interactive cluster name in the step's
// namespace (`run --cluster`): the step runs there and never deletes it.
// The step reports the cluster's GPUs, not the spec's, and a notice tells
// the user the spec's cluster section is not used.
func (s *Site) borrow(ctx context.Context, b *Backend, step *runner.Step, name string) error {
	if err := checkName("run --cluster", name); err != nil {
		return err
	}
	i := &Interactive{Kube: b.Kube, Ray: b.Ray, KeepDir: s.KeepDir}
	rc, err := i.Find(ctx, step.Namespace, name)
	if err != nil {
		return fmt.Errorf("run --cluster: %w", err)
	}
	if b.Dashboard.Token == "" {
		if b.Dashboard.Token, err = i.ReadToken(ctx, rc); err != nil {
			return fmt.Errorf("run --cluster: %w", err)
		}
	}
	if Released(rc) {
		// A step needs the GPUs idle release gave back: it brings them
		// back as up does, and Ray runs its tasks once they joined.
		if _, _, err := i.Restore(ctx, rc, s.now()); err != nil {
			return fmt.Errorf("run --cluster: %w", err)
		}
		step.Notices = append(step.Notices, fmt.Sprintf("interactive cluster %s/%s had given back its GPU workers while idle: "+
			"the step brought them back (raystep up %s does too)", rc.Namespace, rc.Name, rc.Name))
	}
	b.Cluster = rc.Name
	step.Shape = "interactive cluster " + rc.Namespace + "/" + rc.Name
	step.GPUType, step.GPUCount = gpusOf(rc.Annotations[AnnotationGPUs])
	step.Notices = append(step.Notices, fmt.Sprintf("runs on interactive cluster %s/%s, which it borrows: "+
		"the step never deletes it, and the spec's cluster section is not used", rc.Namespace, rc.Name))
	return nil
}

// gpusOf reads the first GPU type and its count from a "type=count,..."
// summary; "" and 0 for none.
func gpusOf(summary string) (string, int) {
	first, _, _ := strings.Cut(summary, ",")
	typ, count, ok := strings.Cut(first, "=")
	n, err := strconv.Atoi(count)
	if !ok || err != nil {
		return "", 0
	}
	return typ, n
}

// runScoped creates or attaches to the RayCluster of the step's Dagster
// run, waits for it within the spec's provision timeout and makes the
// step's RayJob borrow it. The cluster expires the run's timeout
// (spec.timeouts.run) after the latest step that attached to it.
func (s *Site) runScoped(ctx context.Context, b *Backend, step *runner.Step, spec *schemas.Spec, profile *schemas.Profile) error {
	rc, err := BuildRunCluster(spec, profile, step.Namespace, step.Dagster.RunID, s.now().Add(spec.Spec.Timeouts.Run))
	if err != nil {
		return err
	}
	i := &Interactive{Kube: b.Kube, Ray: b.Ray, KeepDir: s.KeepDir, Token: b.Dashboard.Token,
		UnschedulableGrace: b.UnschedulableGrace, Notify: s.notify}
	actx, cancel := context.WithTimeoutCause(ctx, spec.Spec.Timeouts.Provision,
		fmt.Errorf("the run-scoped cluster was not ready within spec.timeouts.provision (%s)", spec.Spec.Timeouts.Provision))
	defer cancel()
	got, created, err := i.Attach(actx, rc)
	if err != nil {
		if errors.Is(err, ErrClusterMismatch) {
			return fleet.AsUsage(err)
		}
		return &runner.InfraError{Phase: runner.PhaseProvision, Err: err}
	}
	if b.Dashboard.Token == "" {
		if b.Dashboard.Token, err = i.ReadToken(ctx, got); err != nil {
			return &runner.InfraError{Phase: runner.PhaseProvision, Err: err}
		}
	}
	b.Cluster = got.Name
	step.Shape = spec.Spec.Cluster.Shape() + " (run-scoped " + got.Namespace + "/" + got.Name + ")"
	how := "attached to"
	if created {
		how = "created"
	}
	step.Notices = append(step.Notices, fmt.Sprintf("%s the run-scoped cluster %s/%s of Dagster run %s, expiring %s: "+
		"the step never deletes it; raystep down --dagster-run-id %s does when the run ends",
		how, got.Namespace, got.Name, step.Dagster.RunID, got.Annotations[AnnotationExpires], step.Dagster.RunID))
	return nil
}
