package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
)

// Backend is the local runner.Backend. Without an existing cluster (no
// Address, no DashboardURL) each step starts a private head with rayhead.Start
// and stops exactly that head at teardown, whatever the teardown policy:
// the head belongs to the step. With an existing cluster the step only
// submits to it and leaves it running.
type Backend struct {
	// Address is RAY_ADDRESS: an http(s) dashboard URL, or a GCS address
	// (host:port, "auto") whose dashboard Ray itself is asked for. Empty
	// (and no DashboardURL) means a private head.
	Address string
	// DashboardURL is the existing cluster's dashboard
	// (RAYSTEP_DASHBOARD_URL or RAY_API_SERVER_ADDRESS); it wins over
	// Address.
	DashboardURL string
	// Token is a bearer token for the dashboard of an existing cluster.
	Token string
	// TokenFrom says where Token came from (RAY_AUTH_TOKEN, a file), for
	// the message when the cluster refuses it.
	TokenFrom string
	// Head configures private heads; Head.RayBin is also the ray whose
	// Python resolves a GCS address.
	Head rayhead.Options
	// Logger receives the backend's notes; nil means none.
	Logger *zap.Logger
	// Lost, if set, watches the existing cluster from Provision to
	// Teardown: it returns why once the cluster is no longer there for
	// the step (a borrowed local cluster reached its expiry or was
	// brought down), and nil when ctx ends first. The step then fails at
	// once instead of riding out a dashboard outage.
	Lost func(ctx context.Context) error
	// Steps, if set, is the dir where a step on a private head keeps its
	// record (StepRecord) while it runs, for ls and ui on this machine.
	Steps string
}

var _ runner.Backend = (*Backend)(nil)

// privateStopTimeout is how long a private head gets to exit after SIGTERM
// before it is killed. Its job has been stopped by then and nothing of it
// is kept, while `ray start --block` may take half a minute to exit.
const privateStopTimeout = time.Second

// Name returns "local".
func (b *Backend) Name() string { return "local" }

// Existing reports whether steps run on an existing cluster rather than a
// private head.
func (b *Backend) Existing() bool { return b.Address != "" || b.DashboardURL != "" }

// Provision starts a private head (ready when Provision returns) or
// describes the existing cluster; what the private head wants people to
// know goes to events.
func (b *Backend) Provision(ctx context.Context, step runner.Step, events runner.Sink) (runner.Cluster, error) {
	log := b.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if b.Existing() {
		return b.reachExisting(ctx)
	}
	opts := b.Head
	opts.Logger = log
	opts.TokenAuth = true
	opts.Warn = func(msg string) { events.Event(runner.Event{Kind: runner.KindWarning, Message: msg}) }
	if opts.StopTimeout == 0 {
		opts.StopTimeout = privateStopTimeout
	}
	h, err := rayhead.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start private ray head: %w", err)
	}
	c := &privateCluster{head: h, events: events, failures: make(chan error, 1), done: make(chan struct{}), steps: b.Steps}
	if c.steps != "" {
		c.record = StepRecord{ID: step.ID, Name: step.Name, Owner: step.Owner, Kind: step.Kind, RunID: step.RunID,
			Asset: strings.Join(step.Dagster.AssetKeys, ","), Created: time.Now().UTC(), DashboardURL: h.DashboardURL(),
			TokenFile: h.TokenFile(), State: "ready", Pid: os.Getpid()}
		c.keepRecord()
	}
	go c.watch()
	return c, nil
}

// reachExisting resolves the existing cluster's dashboard and checks that
// it answers with raystep's token, so that the step calls the cluster
// ready only once its dashboard did.
func (b *Backend) reachExisting(ctx context.Context) (runner.Cluster, error) {
	url, err := ResolveDashboard(ctx, b.DashboardURL, b.Address, b.Head.RayBin, b.Token)
	if errors.Is(err, errGCSRefused) {
		return nil, fmt.Errorf("the GCS at %s refused raystep's request: %s", b.Address, tokenAdvice(b.Token, b.TokenFrom))
	}
	if err != nil {
		return nil, err
	}
	if err := probe(ctx, url, b.Token, b.TokenFrom); err != nil {
		return nil, err
	}
	c := &existingCluster{b: b, url: url, stop: func() {}}
	if b.Lost != nil {
		var wctx context.Context
		wctx, c.stop = context.WithCancel(context.WithoutCancel(ctx))
		c.failures = make(chan error, 1)
		go func() {
			if err := b.Lost(wctx); err != nil {
				c.mu.Lock()
				c.lost = err
				c.mu.Unlock()
				c.failures <- err // buffered: the one send never blocks
			}
		}()
	}
	return c, nil
}

// privateCluster is a head started for one step.
type privateCluster struct {
	head     *rayhead.Head
	events   runner.Sink
	failures chan error
	done     chan struct{} // closed by Teardown
	once     sync.Once
	// steps is the dir of record, the step's StepRecord; "" for none.
	steps  string
	mu     sync.Mutex
	record StepRecord
}

// keepRecord writes the step's record; a failure is a warning: the step
// runs on, unseen by ls and ui.
func (c *privateCluster) keepRecord() {
	if c.steps == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := writeStep(c.steps, c.record); err != nil {
		c.events.Event(runner.Event{Kind: runner.KindWarning, Message: err.Error() + " (ls and ui on this machine do not show the step)"})
	}
}

// RecordOutcome notes how the job ended in the step's record, so that a
// viewer sees it while the head goes.
func (c *privateCluster) RecordOutcome(_ context.Context, status runner.JobStatus) error {
	c.mu.Lock()
	c.record.JobStatus = string(status)
	c.mu.Unlock()
	c.keepRecord()
	return nil
}

func (c *privateCluster) Name() string { return c.head.Address() }

// Ready returns at once: rayhead.Start waited for the dashboard.
func (c *privateCluster) Ready(context.Context) error { return nil }

func (c *privateCluster) Dashboard(context.Context) (runner.Dashboard, error) {
	return runner.Dashboard{URL: c.head.DashboardURL(), Token: c.head.Token()}, nil
}

// SetJobID marks the step's record as running: its job is submitted.
func (c *privateCluster) SetJobID(context.Context, string) error {
	c.mu.Lock()
	c.record.State = "Running"
	c.mu.Unlock()
	c.keepRecord()
	return nil
}

func (c *privateCluster) Failures() <-chan error { return c.failures }

// watch reports the head's end (`ray start --block` ends when any head
// process dies, and its keeper then kills the rest) until Teardown.
func (c *privateCluster) watch() {
	select {
	case <-c.done:
	case <-c.head.Done():
		select {
		case <-c.done: // stopped by Teardown
			return
		default:
		}
		// Done means the keeper killed every process of the head, the
		// job's too: the runner need not try to stop the job.
		c.failures <- runner.Gone(fmt.Errorf("ray head %s (pid %d) exited. %s",
			c.head.Address(), c.head.Pid(), c.head.ExitReport()))
	}
}

// Teardown stops the head, also when keep is true: nothing outlives the
// step on a private head, and the log says so. It does not need the
// dashboard: the head's keeper kills the job's processes with the rest,
// and Teardown reports success only once it confirmed that.
func (c *privateCluster) Teardown(ctx context.Context, keep bool) error {
	c.once.Do(func() { close(c.done) })
	if keep {
		c.events.Event(runner.Event{Kind: runner.KindWarning, Message: "stopping the private ray head although the " +
			"teardown policy keeps clusters: the head belongs to this step; set RAY_ADDRESS to run on a cluster that outlives it"})
	}
	if err := c.head.Stop(ctx); err != nil {
		return fmt.Errorf("stop ray head %s: %w", c.head.Address(), err)
	}
	if c.steps != "" {
		if err := removeStep(c.steps, c.record.ID); err != nil {
			c.events.Event(runner.Event{Kind: runner.KindWarning, Message: err.Error()})
		}
	}
	return nil
}

// existingCluster is a cluster raystep did not start and never stops;
// Provision reached its dashboard at url. failures carries what b.Lost
// saw (nil without Lost); stop ends that watch.
type existingCluster struct {
	b        *Backend
	url      string
	failures chan error
	stop     context.CancelFunc
	mu       sync.Mutex
	lost     error // what Lost reported; nil while the cluster is there
}

func (c *existingCluster) Name() string {
	if c.b.Address != "" {
		return c.b.Address
	}
	return c.b.DashboardURL
}

// Ready returns at once: Provision reached the dashboard.
func (c *existingCluster) Ready(context.Context) error { return nil }

// Dashboard returns the dashboard Provision reached.
func (c *existingCluster) Dashboard(context.Context) (runner.Dashboard, error) {
	return runner.Dashboard{URL: c.url, Token: c.b.Token}, nil
}

func (c *existingCluster) SetJobID(context.Context, string) error { return nil }

// Failures reports the cluster lost (Backend.Lost); nil without Lost.
func (c *existingCluster) Failures() <-chan error {
	if c.failures == nil {
		return nil
	}
	return c.failures
}

// Teardown leaves the cluster running, it is not raystep's, and ends the
// watch of Backend.Lost. A borrowed cluster that reached its expiry while
// the step ran is waited for, within ctx, until its keeper has stopped it:
// the step ends once nothing of it runs, as it says, or says that the
// keeper is still at it.
func (c *existingCluster) Teardown(ctx context.Context, _ bool) error {
	c.stop()
	c.mu.Lock()
	lost := c.lost
	c.mu.Unlock()
	var e *expired
	if errors.As(lost, &e) {
		return e.await(ctx)
	}
	return nil
}

// Borrowed reports that the step does not own an existing cluster.
func (c *existingCluster) Borrowed() bool { return true }

var _ runner.Borrowed = (*existingCluster)(nil)
