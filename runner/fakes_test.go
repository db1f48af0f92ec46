package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// calls records what the fakes were asked to do, in order.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

type fakeBackend struct {
	name      string
	provision func(ctx context.Context, req Step) (Cluster, error)
	// events is the sink the runner handed Provision.
	events Sink
}

var _ Backend = (*fakeBackend)(nil)

func (b *fakeBackend) Name() string { return b.name }
func (b *fakeBackend) Provision(ctx context.Context, req Step, events Sink) (Cluster, error) {
	b.events = events
	return b.provision(ctx, req)
}

type fakeCluster struct {
	name      string
	ready     func(ctx context.Context) error
	dashboard func(ctx context.Context) (Dashboard, error)
	setJobID  func(ctx context.Context, id string) error
	failures  chan error
	teardown  func(ctx context.Context, keep bool) error
	borrowed  bool
}

var (
	_ Cluster  = (*fakeCluster)(nil)
	_ Borrowed = (*fakeCluster)(nil)
)

func (c *fakeCluster) Borrowed() bool { return c.borrowed }

func (c *fakeCluster) Name() string                    { return c.name }
func (c *fakeCluster) Ready(ctx context.Context) error { return c.ready(ctx) }
func (c *fakeCluster) Dashboard(ctx context.Context) (Dashboard, error) {
	return c.dashboard(ctx)
}
func (c *fakeCluster) SetJobID(ctx context.Context, id string) error { return c.setJobID(ctx, id) }
func (c *fakeCluster) Failures() <-chan error {
	if c.failures == nil {
		return nil
	}
	return c.failures
}
func (c *fakeCluster) Teardown(ctx context.Context, keep bool) error { return c.teardown(ctx, keep) }

type fakeJobs struct {
	upload func(ctx context.Context, pkg Package) error
	submit func(ctx context.Context, req JobRequest) (string, error)
	get    func(ctx context.Context, id string) (JobInfo, error)
	stop   func(ctx context.Context, id string) (bool, error)
	tail   func(ctx context.Context, id string, onLine func(string)) error
	// follow, when set, is Tail with its outage reports; tail is not called.
	follow func(ctx context.Context, id string, onLine func(string), onOutage func(Outage)) error
}

var _ Jobs = (*fakeJobs)(nil)

func (j *fakeJobs) UploadPackage(ctx context.Context, pkg Package) error { return j.upload(ctx, pkg) }
func (j *fakeJobs) Submit(ctx context.Context, req JobRequest) (string, error) {
	return j.submit(ctx, req)
}
func (j *fakeJobs) Get(ctx context.Context, id string) (JobInfo, error) { return j.get(ctx, id) }
func (j *fakeJobs) Stop(ctx context.Context, id string) (bool, error)   { return j.stop(ctx, id) }
func (j *fakeJobs) Tail(ctx context.Context, id string, onLine func(string), onOutage func(Outage)) error {
	if j.follow != nil {
		return j.follow(ctx, id, onLine, onOutage)
	}
	return j.tail(ctx, id, onLine)
}

type fakeSession struct {
	mu     sync.Mutex
	sent   []*pipes.Message
	closed []*Exception
	send   func(m *pipes.Message) error // nil accepts everything
}

var _ Session = (*fakeSession)(nil)

func (s *fakeSession) Send(m *pipes.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.send != nil {
		if err := s.send(m); err != nil {
			return err
		}
	}
	s.sent = append(s.sent, m)
	return nil
}

func (s *fakeSession) Close(exc *Exception) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = append(s.closed, exc)
	return nil
}

// fakeClock is a manual clock. Timers up to auto fire at once (polls and
// backoffs); longer ones (deadlines, grace periods) fire when Advance
// passes them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	auto   time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

var _ Clock = (*fakeClock)(nil)

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), auto: 2 * time.Second}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	if d <= c.auto {
		go f()
		return func() bool { return false }
	}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock and fires the timers it passes.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			go t.f()
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
}
