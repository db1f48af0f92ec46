package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/raystep/raystep/rayhead"
)

// Interactive clusters on the local backend are detached private heads:
// started like a step's head (loopback, token auth, a temp dir of their
// own) by rayhead.Start with rayhead.DetachOptions, then handed over to
// their keeper, which from then on is their supervisor. It runs in a
// session of its own with its output in NAME.log, so it survives the
// raystep that started it, even SIGKILLed, and it stops the head, with
// every process of it, and removes its temp dir at the expiry in NAME.json,
// which it reads again at that expiry and on SIGHUP: no raystep command
// needs to run again. A supervisor written in Python, not a raystep
// process, because it is the keeper that steps' heads already trust to
// kill a head's whole tree (it is their subreaper), it needs nothing but
// Python's standard library beside Ray, and a running head never depends
// on the raystep binary that started it.

// Clusters starts, lists and stops the interactive clusters recorded in
// one state dir (StateDir). `raystep up`, `ls`, `down` and `gc` on the
// local backend map onto it one to one:
//
//	dir, err := local.StateDir(os.Getenv)
//	c := &local.Clusters{Dir: dir, Head: rayhead.Options{RayBin: rayBin}}
//	in, started, err := c.Up(ctx, local.UpOptions{Name: "dev", Owner: user, TTL: 4 * time.Hour})
//	all, err := c.List()          // each with its Status
//	err = c.Down(ctx, "dev")      // errors.Is(err, local.ErrNotFound) for an unknown name
//	results, err := c.GC(ctx, dryRun)
//
// A person uses a cluster through in.DashboardURL with the token in
// in.TokenFile (the Jobs API, `raystep run --cluster`), or with in.Env()
// set (a script's ray.init()).
type Clusters struct {
	// Dir holds the records; it is created when needed.
	Dir string
	// Head configures new heads (RayBin, NumCPUs, ...); token auth is
	// always on, and a zero StopTimeout means detachedStopTimeout.
	Head rayhead.Options
	// Now is the clock that Up stamps records with and List and GC judge
	// expiries by; nil means time.Now. A head's supervisor always goes by
	// the system clock.
	Now func() time.Time
}

// UpOptions says which cluster Up brings up.
type UpOptions struct {
	// Name is the cluster's name, a DNS label (CheckName).
	Name string
	// Owner is who brings it up; it must match a live cluster's owner.
	Owner string
	// TTL is how long it lives from now: a new cluster's lifetime, or a
	// live one's new expiry, now plus TTL (to the second), earlier or
	// later than before.
	TTL time.Duration
	// Idle is how long it may be idle before its supervisor stops it; 0
	// never. Up on a live cluster sets it anew, and counts as use.
	Idle time.Duration
}

// detachedStopTimeout is how long a detached head's processes get after
// SIGTERM before they are killed: an interactive cluster keeps nothing.
const detachedStopTimeout = 2 * time.Second

// teardownTimeout bounds stopping a head that Up could not hand over.
const teardownTimeout = time.Minute

func (c *Clusters) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// supervisor is in's head's keeper, as rayhead knows it.
func (c *Clusters) supervisor(in Interactive) rayhead.Detached {
	return rayhead.Detached{Pid: in.SupervisorPid, TempDir: in.TempDir}
}

func (o UpOptions) check() error {
	if err := CheckName(o.Name); err != nil {
		return err
	}
	if o.Owner == "" {
		return fmt.Errorf("cluster %s: the owner is empty", o.Name)
	}
	if o.TTL <= 0 {
		return fmt.Errorf("cluster %s: ttl %s: want a positive duration", o.Name, o.TTL)
	}
	return nil
}

// Up brings up the interactive cluster o names and returns it running.
// When a live cluster of that name exists, Up starts nothing: it moves
// its expiry to now plus o.TTL, and its supervisor goes by the new expiry
// at once (started is false). A record of a cluster that is gone or
// expired is cleared away (Down) before a new head starts under its name.
func (c *Clusters) Up(ctx context.Context, o UpOptions) (in Interactive, started bool, err error) {
	if err := o.check(); err != nil {
		return Interactive{}, false, err
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return Interactive{}, false, err
	}
	defer unlock()
	cur, err := c.read(o.Name)
	switch {
	case err == nil && cur.Status == StatusRunning:
		in, err := c.extend(cur, o)
		return in, false, err
	case err == nil:
		if err := c.stop(ctx, cur); err != nil {
			return Interactive{}, false, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return Interactive{}, false, err
	}
	in, err = c.start(ctx, o)
	return in, err == nil, err
}

// extend gives the live cluster cur the expiry o asks for.
func (c *Clusters) extend(cur Interactive, o UpOptions) (Interactive, error) {
	if cur.Owner != o.Owner {
		return Interactive{}, fmt.Errorf("cluster %s belongs to %s, not %s", cur.Name, cur.Owner, o.Owner)
	}
	cur.Expires = c.now().Add(o.TTL).Truncate(time.Second).UTC()
	cur.IdleSeconds, cur.ActiveAt = int64(o.Idle/time.Second), c.now().Truncate(time.Second).UTC()
	if err := c.write(cur); err != nil {
		return Interactive{}, fmt.Errorf("extend cluster %s: %w", cur.Name, err)
	}
	if err := c.supervisor(cur).Reload(); err != nil {
		return Interactive{}, fmt.Errorf("extend cluster %s: %w", cur.Name, err)
	}
	return cur, nil
}

// start starts a detached head for o, records it and hands it over to its
// supervisor; on failure nothing of it is left but its log.
func (c *Clusters) start(ctx context.Context, o UpOptions) (Interactive, error) {
	log := c.logPath(o.Name)
	if err := os.Remove(log); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Interactive{}, fmt.Errorf("start cluster %s: %w", o.Name, err)
	}
	opts := c.Head
	opts.TokenAuth = true
	opts.Monitor = true // people run `ray status` on their cluster
	opts.Detach = &rayhead.DetachOptions{Record: c.recordPath(o.Name), Log: log}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = detachedStopTimeout
	}
	h, err := rayhead.Start(ctx, opts)
	if err != nil {
		return Interactive{}, fmt.Errorf("start cluster %s (its log: %s): %w", o.Name, log, err)
	}
	now := c.now()
	in := Interactive{Name: o.Name, Owner: o.Owner, Created: now.Truncate(time.Second).UTC(),
		Expires: now.Add(o.TTL).Truncate(time.Second).UTC(), DashboardURL: h.DashboardURL(),
		Address: h.Address(), TokenFile: h.TokenFile(), SupervisorPid: h.KeeperPid(),
		TempDir: h.TempDir(), Log: log, Status: StatusRunning,
		IdleSeconds: int64(o.Idle / time.Second), ActiveAt: now.Truncate(time.Second).UTC()}
	err = c.write(in)
	if err == nil {
		err = h.Detach(ctx)
	}
	if err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		rmErr := os.Remove(c.recordPath(o.Name))
		if errors.Is(rmErr, fs.ErrNotExist) {
			rmErr = nil
		}
		return Interactive{}, errors.Join(fmt.Errorf("start cluster %s (its log: %s): %w", o.Name, log, err),
			h.Stop(stopCtx), rmErr)
	}
	return in, nil
}

// Down stops the cluster name and waits until every process of it is
// gone and its temp dir removed, then removes its record and log. A
// cluster that is gone or expired only has what is left of it cleared
// away. It returns an error wrapping ErrNotFound when name has no record.
func (c *Clusters) Down(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	in, err := c.Get(name)
	if err != nil {
		return err
	}
	return c.stop(ctx, in)
}

// stop stops in's head (or clears away what is left of it) and removes
// its record once nothing of it is left.
func (c *Clusters) stop(ctx context.Context, in Interactive) error {
	if err := c.supervisor(in).Stop(ctx); err != nil {
		return fmt.Errorf("stop cluster %s (supervisor pid %d, log %s): %w", in.Name, in.SupervisorPid, in.Log, err)
	}
	if err := c.remove(in.Name); err != nil {
		return fmt.Errorf("stop cluster %s: %w", in.Name, err)
	}
	return nil
}

// Result is what GC did with one cluster.
type Result struct {
	// Cluster is the cluster as GC found it.
	Cluster Interactive
	// Action is what GC did, or would do with dryRun.
	Action Action
	// Err is why the action failed; nil when it succeeded.
	Err error
}

// Action is what GC does with a cluster.
type Action string

const (
	// ActionKept: the cluster runs and has not expired.
	ActionKept Action = "kept"
	// ActionStopped: the cluster's supervisor still ran; GC stopped it.
	ActionStopped Action = "stopped"
	// ActionRemoved: the supervisor was gone; GC cleared away what was left.
	ActionRemoved Action = "removed"
)

// GC stops every expired cluster whose supervisor still runs (it should
// have stopped itself) and clears away every cluster that is gone or
// expired, as Down does; it keeps running ones. With dryRun it only says
// what it would do. The error joins those of the results and names the
// records it could not read, which it leaves alone.
func (c *Clusters) GC(ctx context.Context, dryRun bool) ([]Result, error) {
	unlock, err := c.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	all, err := c.List()
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("gc local clusters: %w", err))
	}
	results := make([]Result, 0, len(all))
	for _, in := range all {
		r := Result{Cluster: in, Action: ActionRemoved}
		switch {
		case in.Status == StatusRunning:
			r.Action = ActionKept
		case c.supervisor(in).Running():
			r.Action = ActionStopped
		}
		if r.Action != ActionKept && !dryRun {
			r.Err = c.stop(ctx, in)
			errs = append(errs, r.Err)
		}
		results = append(results, r)
	}
	return results, errors.Join(errs...)
}
