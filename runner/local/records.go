package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/rayhead"
)

// The records of interactive clusters: one JSON file per cluster in the
// state dir, NAME.json, written to a temporary file and renamed, so a
// reader sees the old record or the new one, never half of one; the
// head's keeper reads its expiry from it. NAME.log beside it is the
// head's output. .lock serializes the commands that start or stop
// clusters (Up, Down, GC); List takes no lock.

// Interactive is one interactive cluster: a detached private head with a
// name, an owner and an expiry, as its record says and its status
// checks. It never holds the head's token, only the file that does.
type Interactive struct {
	// Name is the cluster's name, a DNS label.
	Name string `json:"name"`
	// Owner is who brought it up.
	Owner string `json:"owner"`
	// Created is when its head was ready.
	Created time.Time `json:"created"`
	// Expires is when its supervisor stops it.
	Expires time.Time `json:"expires"`
	// DashboardURL is the head's dashboard, the Jobs API's base URL.
	DashboardURL string `json:"dashboardURL"`
	// Address is the head's GCS address, the value for RAY_ADDRESS.
	Address string `json:"address"`
	// TokenFile is the 0600 file holding the head's token (RAY_AUTH_TOKEN_PATH).
	TokenFile string `json:"tokenFile"`
	// SupervisorPid is the pid of the process that holds the head and
	// stops it at its expiry.
	SupervisorPid int `json:"supervisorPid"`
	// TempDir is the head's temp dir, removed when it stops.
	TempDir string `json:"tempDir"`
	// Log is the file holding the output of the head and its supervisor.
	Log string `json:"log"`
	// IdleSeconds is how long the head may be idle before its supervisor
	// stops it (up's --idle or --idle-stop, the shorter); 0 never.
	IdleSeconds int64 `json:"idleSeconds,omitempty"`
	// ActiveAt is when up last made or extended it: idleness counts from
	// then at the earliest.
	ActiveAt time.Time `json:"activeAt,omitzero"`
	// Status is what a check of its supervisor found when it was read; it
	// is not stored.
	Status Status `json:"-"`
}

// Env returns the variables, KEY=VALUE, that let Ray's own clients on
// this machine (a script's ray.init(), `ray status`) use the cluster: its
// GCS address as RAY_ADDRESS, loopback, and token auth from the token
// file; never the token itself.
func (in Interactive) Env() []string {
	host, _, err := net.SplitHostPort(in.Address)
	if err != nil {
		host = in.Address
	}
	return append([]string{"RAY_ADDRESS=" + in.Address}, rayhead.ClientEnv(host, in.TokenFile)...)
}

// Status says whether an interactive cluster still runs.
type Status string

const (
	// StatusRunning: its supervisor runs and its expiry has not passed.
	StatusRunning Status = "running"
	// StatusExpired: its expiry has passed; its supervisor stopped it, is
	// stopping it, or ended earlier (GC clears away what is left).
	StatusExpired Status = "expired"
	// StatusGone: its supervisor ended before its expiry (the head
	// exited, or the supervisor was killed); nothing will stop what may
	// be left of it but Down or GC.
	StatusGone Status = "gone"
)

// ErrNotFound is returned by Get and Down for a name that has no record.
var ErrNotFound = fleet.NotFound("no such local cluster")

// nameRE is a DNS label (RFC 1123).
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// CheckName refuses a cluster name that is not a DNS label, the same rule
// as for a Kubernetes RayCluster's name: a usage error (fleet.ErrUsage),
// whichever command was given it.
func CheckName(name string) error {
	if len(name) > 63 || !nameRE.MatchString(name) {
		return fleet.BadName(fmt.Sprintf("cluster name %q: want a DNS label: at most 63 lower-case letters, digits "+
			"and '-', starting and ending with a letter or digit", name))
	}
	return nil
}

// StateDir returns where interactive clusters are recorded:
// $XDG_STATE_HOME/raystep/clusters, else ~/.local/state/raystep/clusters.
// getenv reads the environment (os.Getenv in raystep, a map in tests).
func StateDir(getenv func(string) string) (string, error) {
	if base := getenv("XDG_STATE_HOME"); filepath.IsAbs(base) {
		return filepath.Join(base, "raystep", "clusters"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("find the cluster state dir: neither XDG_STATE_HOME nor HOME is an absolute path")
	}
	return filepath.Join(home, ".local", "state", "raystep", "clusters"), nil
}

func (c *Clusters) recordPath(name string) string { return filepath.Join(c.Dir, name+".json") }
func (c *Clusters) logPath(name string) string    { return filepath.Join(c.Dir, name+".log") }

// read reads name's record and checks its status; fs.ErrNotExist when
// there is none.
func (c *Clusters) read(name string) (Interactive, error) {
	b, err := os.ReadFile(c.recordPath(name))
	if err != nil {
		return Interactive{}, err
	}
	var in Interactive
	if err := json.Unmarshal(b, &in); err != nil {
		return Interactive{}, fmt.Errorf("read cluster record %s: %w", c.recordPath(name), err)
	}
	if in.Name != name {
		return Interactive{}, fmt.Errorf("read cluster record %s: it names cluster %q", c.recordPath(name), in.Name)
	}
	in.Status = c.status(in)
	return in, nil
}

// status checks in's supervisor: a record alone is never trusted.
func (c *Clusters) status(in Interactive) Status {
	switch {
	case !c.now().Before(in.Expires):
		return StatusExpired
	case c.supervisor(in).Running():
		return StatusRunning
	}
	return StatusGone
}

// write replaces in's record atomically.
func (c *Clusters) write(in Interactive) error {
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return fmt.Errorf("write cluster record: %w", err)
	}
	f, err := os.CreateTemp(c.Dir, "."+in.Name+".*.tmp")
	if err != nil {
		return fmt.Errorf("write cluster record: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.recordPath(in.Name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write cluster record %s: %w", c.recordPath(in.Name), err)
	}
	return nil
}

// remove deletes in's record and log.
func (c *Clusters) remove(name string) error {
	var errs []error
	for _, p := range []string{c.recordPath(name), c.logPath(name)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Get returns the cluster name as its record says, with its status (for
// `raystep run --cluster NAME`, `raystep dashboard NAME`); an error
// wrapping ErrNotFound when it has no record.
func (c *Clusters) Get(name string) (Interactive, error) {
	if err := CheckName(name); err != nil {
		return Interactive{}, err
	}
	in, err := c.read(name)
	if errors.Is(err, fs.ErrNotExist) {
		return Interactive{}, fmt.Errorf("cluster %s: %w (none recorded in %s)", name, ErrNotFound, c.Dir)
	}
	return in, err
}

// List returns the recorded interactive clusters by name, each with the
// status a check of its supervisor found. It takes no lock and starts
// nothing. A record it cannot read is named in the error, and the others
// are still returned.
func (c *Clusters) List() ([]Interactive, error) {
	paths, err := filepath.Glob(filepath.Join(c.Dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list clusters in %s: %w", c.Dir, err)
	}
	sort.Strings(paths)
	var out []Interactive
	var errs []error
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		in, err := c.read(name)
		switch {
		case errors.Is(err, fs.ErrNotExist): // removed meanwhile
		case err != nil:
			errs = append(errs, err)
		default:
			out = append(out, in)
		}
	}
	return out, errors.Join(errs...)
}

// lock takes the state dir's lock, creating the dir, and returns its
// release; it waits for a command holding it until ctx ends.
func (c *Clusters) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cluster state dir: %w", err)
	}
	path := filepath.Join(c.Dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock cluster state dir: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: another raystep command holds it: %w", path, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
