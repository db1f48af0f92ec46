package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/test/raytest"
)

// The helper process: the test binary run again with these variables set
// brings up one cluster, as `raystep up` would, prints "up" and waits to
// be killed.
const (
	helperDir  = "RAYSTEP_TEST_DETACHED_DIR"
	helperName = "RAYSTEP_TEST_DETACHED_NAME"
	helperRay  = "RAYSTEP_TEST_DETACHED_RAY"
)

// TestDetachedHelperProcess is the helper process; run by the test
// binary itself, it does nothing.
func TestDetachedHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDir)
	if dir == "" {
		return
	}
	c := &local.Clusters{Dir: dir, Head: rayhead.Options{RayBin: os.Getenv(helperRay), NumCPUs: 1}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, _, err := c.Up(ctx, local.UpOptions{Name: os.Getenv(helperName), Owner: "tester", TTL: 10 * time.Minute}); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	fmt.Println("up")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test kills this process
	os.Exit(0)
}

// upInChild brings up the cluster name in a child process and returns
// once it is up, with the child still running.
func upInChild(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDetachedHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDir+"="+dir, helperName+"="+name, helperRay+"="+raytest.RayBin(t))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "up\n" {
		t.Fatalf("the helper process said %q (%v), want up", line, err)
	}
	return cmd
}

// newClusters returns Clusters on a fresh state dir whose clusters are
// all stopped at the end of the test, whatever happened.
func newClusters(t *testing.T) *local.Clusters {
	t.Helper()
	c := &local.Clusters{Dir: t.TempDir(), Head: rayhead.Options{RayBin: raytest.RayBin(t), NumCPUs: 1}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		all, _ := c.List()
		for _, in := range all {
			if err := c.Down(ctx, in.Name); err != nil {
				t.Errorf("clean up: %v", err)
			}
		}
	})
	return c
}

// up brings up name in this process.
func up(ctx context.Context, t *testing.T, c *local.Clusters, name string, ttl time.Duration) local.Interactive {
	t.Helper()
	in, started, err := c.Up(ctx, local.UpOptions{Name: name, Owner: "tester", TTL: ttl})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if !started {
		t.Fatalf("Up of a new cluster did not start one")
	}
	return in
}

// only returns the one recorded cluster.
func only(t *testing.T, c *local.Clusters) local.Interactive {
	t.Helper()
	all, err := c.List()
	if err != nil || len(all) != 1 {
		t.Fatalf("List() = %+v, %v; want one cluster", all, err)
	}
	return all[0]
}

// alive returns those of pids that still run (a zombie does not).
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		if _, rest, _ := strings.Cut(string(stat), ") "); !strings.HasPrefix(rest, "Z") {
			out = append(out, pid)
		}
	}
	return out
}

// awaitExit waits until each of pids has exited (its pidfd turns
// readable: the process is gone or a zombie), or bound passes. A process
// the keeper killed may still be on its way out when the keeper is gone.
func awaitExit(pids []int, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		for {
			left := max(time.Until(deadline), 0)
			_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds()))
			if err != unix.EINTR {
				break
			}
		}
		_ = unix.Close(fd)
	}
}

// checkNothingLeft checks that none of pids runs, no process mentions
// in's temp dir, and the dir (with the token file) is gone.
func checkNothingLeft(t *testing.T, in local.Interactive, pids []int) {
	t.Helper()
	awaitExit(pids, time.Minute)
	if left := alive(pids); len(left) > 0 {
		out, _ := exec.Command("ps", "-o", "pid,ppid,pgid,stat,cmd", "-p", strings.Trim(fmt.Sprint(left), "[]")).CombinedOutput()
		t.Errorf("processes of cluster %s still run:\n%s", in.Name, out)
	}
	if left := alive(processesMentioning(t, in.TempDir)); len(left) > 0 {
		t.Errorf("processes %v mention the temp dir %s", left, in.TempDir)
	}
	if _, err := os.Stat(in.TempDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s left behind (stat: %v)", in.TempDir, err)
	}
}

// readFile returns the contents of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dashboardStatus returns the status of GET /api/version on in's
// dashboard, with the token from its token file when withToken.
func dashboardStatus(t *testing.T, in local.Interactive, withToken bool) int {
	t.Helper()
	auth := ""
	if withToken {
		token, err := os.ReadFile(in.TokenFile)
		if err != nil {
			t.Fatalf("read the token file: %v", err)
		}
		auth = "Bearer " + strings.TrimSpace(string(token))
	}
	return request(t, http.MethodGet, in.DashboardURL+"/api/version", auth)
}

// waitGone waits until in's supervisor no longer runs.
func waitGone(ctx context.Context, t *testing.T, in local.Interactive) {
	t.Helper()
	d := rayhead.Detached{Pid: in.SupervisorPid, TempDir: in.TempDir}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for d.Running() {
		select {
		case <-ctx.Done():
			t.Fatalf("the supervisor (pid %d) of cluster %s still runs: %v", in.SupervisorPid, in.Name, ctx.Err())
		case <-tick.C:
		}
	}
}
