package local_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/test/raytest"
)

// TestDetachedHeadOutlivesItsStarterAndStopsAtItsExpiry brings up a
// cluster from a process that is then SIGKILLed: the head still answers
// (with its token only); Up again with the same name moves its expiry,
// later then earlier, without starting a twin; and at that expiry, with
// no raystep command run, every process of it is gone and its temp dir
// removed.
func TestDetachedHeadOutlivesItsStarterAndStopsAtItsExpiry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := newClusters(t)
	child := upInChild(t, c.Dir, "c1")
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	in := only(t, c)
	pids := headProcesses(t, in.SupervisorPid, in.TempDir)
	if in.Status != local.StatusRunning || in.Owner != "tester" {
		t.Fatalf("after its starter was killed: %+v, want running, owned by tester", in)
	}
	if got := dashboardStatus(t, in, true); got != http.StatusOK {
		t.Errorf("the dashboard answered %d with the token, want 200", got)
	}
	if got := dashboardStatus(t, in, false); got != http.StatusUnauthorized && got != http.StatusForbidden {
		t.Errorf("the dashboard answered %d without the token, want 401 or 403", got)
	}

	for _, ttl := range []time.Duration{time.Hour, 3 * time.Second} {
		before := time.Now()
		got, started, err := c.Up(ctx, local.UpOptions{Name: "c1", Owner: "tester", TTL: ttl})
		if err != nil || started {
			t.Fatalf("Up --ttl %s on the live cluster = started %v, %v; want its expiry moved", ttl, started, err)
		}
		if got.Expires.Before(before.Add(ttl).Add(-time.Second)) || got.Expires.After(time.Now().Add(ttl)) {
			t.Errorf("Up --ttl %s at %v: expires %v", ttl, before, got.Expires)
		}
		// An up counts as activity: it moves ActiveAt to its own second.
		if got.ActiveAt.Before(before.Truncate(time.Second)) || got.ActiveAt.After(time.Now()) {
			t.Errorf("Up --ttl %s at %v: active at %v", ttl, before, got.ActiveAt)
		}
		want := in
		want.Expires, want.ActiveAt = got.Expires, got.ActiveAt
		if diff := cmp.Diff(want, only(t, c)); diff != "" {
			t.Errorf("the record after Up --ttl %s (-want +got):\n%s", ttl, diff)
		}
		in = want
	}
	waitGone(ctx, t, in)
	if now := time.Now(); now.Before(in.Expires) {
		t.Errorf("the head stopped at %v, before its expiry %v", now, in.Expires)
	}
	checkNothingLeft(t, in, pids)
	if got := only(t, c); got.Status != local.StatusExpired {
		t.Errorf("List() after the expiry: status %s, want expired", got.Status)
	}
	log, _ := os.ReadFile(in.Log)
	if !strings.Contains(string(log), "stopping the head: it expired") {
		t.Errorf("the log does not say that the head expired:\n%s", log)
	}
}

// TestDetachedGCStopsExpiredAndKeepsLive brings up one cluster: List and
// Get return its record, and a script run with its Env reaches it; GC
// keeps it while it is live, and (with a clock past its expiry) a dry run
// keeps it too, then GC stops it and nothing is left; Down and Get then
// say it is not found. (Down of a live cluster: TestLocalUpLifecycle, in
// test/e2e, through the binary.)
func TestDetachedGCStopsExpiredAndKeepsLive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := newClusters(t)
	in := up(ctx, t, c, "c3", 10*time.Minute)
	pids := headProcesses(t, in.SupervisorPid, in.TempDir)
	if diff := cmp.Diff(in, only(t, c)); diff != "" {
		t.Errorf("List() after Up (-want +got):\n%s", diff)
	}
	got, err := c.Get("c3")
	if diff := cmp.Diff(in, got); err != nil || diff != "" {
		t.Errorf("Get(c3): %v, (-want +got):\n%s", err, diff)
	}
	// A script run with the cluster's Env, as a person would from a shell.
	script := exec.CommandContext(ctx, rayhead.Interpreter(raytest.RayBin(t)), "-c",
		"import ray; ray.init(); print(ray.get(ray.remote(lambda: 'ran on ' + 'the cluster').remote()))")
	script.Env = append(os.Environ(), in.Env()...)
	out, err := script.CombinedOutput()
	if !strings.Contains(string(out), "ran on the cluster") {
		t.Errorf("a script with Env() %v: %v, output:\n%s", in.Env(), err, out)
	}
	if strings.Contains(strings.Join(in.Env(), " "), strings.TrimSpace(readFile(t, in.TokenFile))) {
		t.Errorf("Env() %v holds the token itself", in.Env())
	}

	late := &local.Clusters{Dir: c.Dir, Now: func() time.Time { return time.Now().Add(11 * time.Minute) }}
	for _, tt := range []struct {
		name   string
		c      *local.Clusters
		dryRun bool
		want   local.Action
	}{
		{"live", c, false, local.ActionKept},
		{"expired, dry run", late, true, local.ActionStopped},
		{"expired", late, false, local.ActionStopped},
	} {
		res, err := tt.c.GC(ctx, tt.dryRun)
		if err != nil || len(res) != 1 || res[0].Action != tt.want || res[0].Cluster.Name != "c3" {
			t.Fatalf("%s: GC() = %+v, %v; want c3 %s", tt.name, res, err, tt.want)
		}
		if tt.want == local.ActionKept || tt.dryRun {
			if got := dashboardStatus(t, in, true); got != http.StatusOK {
				t.Fatalf("%s: after GC the dashboard answers %d, want 200", tt.name, got)
			}
		}
	}
	checkNothingLeft(t, in, pids)
	if all, err := c.List(); len(all) != 0 || err != nil {
		t.Errorf("List() after GC = %+v, %v; want nothing", all, err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "c3.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record is left behind (stat: %v)", err)
	}
	if err := c.Down(ctx, "c3"); !errors.Is(err, local.ErrNotFound) {
		t.Errorf("Down of a cluster that is gone = %v, want ErrNotFound", err)
	}
	if _, err := c.Get("c3"); !errors.Is(err, local.ErrNotFound) || !strings.Contains(err.Error(), c.Dir) {
		t.Errorf("Get of a cluster that is gone = %v, want ErrNotFound naming %s", err, c.Dir)
	}
}

// TestDetachedListReportsAKilledSupervisorAsGone SIGKILLs a cluster's
// supervisor: List says gone, at once, and GC clears away the head it
// left running.
func TestDetachedListReportsAKilledSupervisorAsGone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := newClusters(t)
	in := up(ctx, t, c, "c4", 10*time.Minute)
	pids := headProcesses(t, in.SupervisorPid, in.TempDir)
	if err := syscall.Kill(in.SupervisorPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, in)
	if got := only(t, c); got.Status != local.StatusGone {
		t.Errorf("List() after the supervisor was killed: status %s, want gone", got.Status)
	}
	if len(alive(pids)) < 2 {
		t.Fatalf("the head died with its supervisor: nothing for GC to clear away")
	}
	res, err := c.GC(ctx, false)
	if err != nil || len(res) != 1 || res[0].Action != local.ActionRemoved {
		t.Fatalf("GC() = %+v, %v; want c4 removed", res, err)
	}
	checkNothingLeft(t, in, pids)
	if all, err := c.List(); len(all) != 0 || err != nil {
		t.Errorf("List() after GC = %+v, %v; want nothing", all, err)
	}
}

// TestDetachedRefusesBadOptions checks Up's and Down's checks, which come
// before anything is created.
func TestDetachedRefusesBadOptions(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	c := &local.Clusters{Dir: dir}
	long := strings.Repeat("a", 64)
	for _, tt := range []struct {
		name string
		o    local.UpOptions
		want string
	}{
		{"upper case", local.UpOptions{Name: "Dev", Owner: "a", TTL: time.Hour}, `cluster name "Dev": want a DNS label`},
		{"underscore", local.UpOptions{Name: "my_dev", Owner: "a", TTL: time.Hour}, `cluster name "my_dev": want a DNS label`},
		{"dash first", local.UpOptions{Name: "-dev", Owner: "a", TTL: time.Hour}, `cluster name "-dev": want a DNS label`},
		{"too long", local.UpOptions{Name: long, Owner: "a", TTL: time.Hour}, `cluster name "` + long + `": want a DNS label`},
		{"empty", local.UpOptions{Owner: "a", TTL: time.Hour}, `cluster name "": want a DNS label`},
		{"no owner", local.UpOptions{Name: "dev", TTL: time.Hour}, "cluster dev: the owner is empty"},
		{"no ttl", local.UpOptions{Name: "dev", Owner: "a"}, "cluster dev: ttl 0s: want a positive duration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := c.Up(context.Background(), tt.o)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Up(%+v) = %v, want %q", tt.o, err, tt.want)
			}
		})
	}
	if err := c.Down(context.Background(), "a.b"); err == nil || !strings.HasPrefix(err.Error(), `cluster name "a.b"`) {
		t.Errorf("Down(a.b) = %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state dir was created for bad options (stat: %v)", err)
	}
	if all, err := c.List(); len(all) != 0 || err != nil {
		t.Errorf("List() of a missing dir = %+v, %v; want nothing", all, err)
	}
}

// TestDetachedStateDir checks where records go.
func TestDetachedStateDir(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"xdg", map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/raystep/clusters", false},
		{"home", map[string]string{"HOME": "/h"}, "/h/.local/state/raystep/clusters", false},
		{"relative xdg", map[string]string{"XDG_STATE_HOME": "s", "HOME": "/h"}, "/h/.local/state/raystep/clusters", false},
		{"nothing", map[string]string{}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := local.StateDir(func(k string) string { return tt.env[k] })
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("StateDir() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
