package local

import (
	"context"
	"errors"
	"fmt"
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
func (b *Backend) Provision(ctx context.Context, _ runner.Step, events runner.Sink) (runner.Cluster, error) {
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
	c := &privateCluster{head: h, events: events, failures: make(chan error, 1), done: make(chan struct{})}
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
	return &existingCluster{b: b, url: url}, nil
}

// privateCluster is a head started for one step.
type privateCluster struct {
	head     *rayhead.Head
	events   runner.Sink
	failures chan error
	done     chan struct{} // closed by Teardown
	once     sync.Once
}

func (c *privateCluster) Name() string { return c.head.Address() }

// Ready returns at once: rayhead.Start waited for the dashboard.
func (c *privateCluster) Ready(context.Context) error { return nil }

func (c *privateCluster) Dashboard(context.Context) (runner.Dashboard, error) {
	return runner.Dashboard{URL: c.head.DashboardURL(), Token: c.head.Token()}, nil
}

func (c *privateCluster) SetJobID(context.Context, string) error { return nil }

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
		c.failures <- fmt.Errorf("ray head %s (pid %d) exited; its last output:\n%s",
			c.head.Address(), c.head.Pid(), c.head.Output())
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
	return nil
}

// existingCluster is a cluster raystep did not start and never stops;
// Provision reached its dashboard at url.
type existingCluster struct {
	b   *Backend
	url string
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

func (c *existingCluster) Failures() <-chan error { return nil }

// Teardown leaves the cluster running: it is not raystep's.
func (c *existingCluster) Teardown(context.Context, bool) error { return nil }

// Borrowed reports that the step does not own an existing cluster.
func (c *existingCluster) Borrowed() bool { return true }

var _ runner.Borrowed = (*existingCluster)(nil)
