package local_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/test/raytest"
)

// listener is one listening TCP socket of a head's process.
type listener struct {
	ip   net.IP
	port int
	pid  int
	comm string
}

func (l listener) String() string {
	return fmt.Sprintf("%s (pid %d %s)", net.JoinHostPort(l.ip.String(), strconv.Itoa(l.port)), l.pid, l.comm)
}

// headProcesses returns the pids in process group pgid, those whose
// command line mentions dir (the head's private temp dir), and all their
// descendants: Ray's workers, the job supervisor and the driver run in
// process groups of their own.
func headProcesses(t *testing.T, pgid int, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	in := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid pgrp ...
		_, rest, _ := strings.Cut(string(stat), ") ")
		fields := strings.Fields(rest)
		if len(fields) < 3 {
			continue
		}
		parent[pid], _ = strconv.Atoi(fields[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		in[pid] = fields[2] == strconv.Itoa(pgid) || strings.Contains(string(cmdline), dir+"/")
	}
	var pids []int
	for pid := range parent {
		for p := pid; p > 1; p = parent[p] {
			if in[p] {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// listeners returns the listening TCP sockets (IPv4 and IPv6) that pids
// hold, read from /proc/PID/fd and /proc/net/tcp*.
func listeners(t *testing.T, pids []int) []listener {
	t.Helper()
	owner := map[string]int{} // socket inode -> pid
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // the process exited meanwhile
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(dir, fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				owner[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = pid
			}
		}
	}
	var out []listener
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A is LISTEN
				continue
			}
			pid, ok := owner[fields[9]]
			if !ok {
				continue
			}
			ip, port := parseProcAddr(t, fields[1])
			comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
			out = append(out, listener{ip: ip, port: port, pid: pid, comm: strings.TrimSpace(string(comm))})
		}
		_ = f.Close()
	}
	return out
}

// parseProcAddr decodes "0100007F:1F90" (IPv4) or its 32-digit IPv6 form:
// the address is in host byte order per 32-bit word, the port big-endian.
func parseProcAddr(t *testing.T, s string) (net.IP, int) {
	t.Helper()
	hexIP, hexPort, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	if err != nil {
		t.Fatalf("address %q: %v", s, err)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		t.Fatalf("port %q: %v", s, err)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i+4 <= len(raw); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return ip, int(port)
}

// TestPrivateHeadExposure starts a private head as raystep does, runs a
// driver that starts a worker, and checks, while they all run, that every
// listening socket of the head's processes is bound to loopback and that
// the Jobs API refuses requests without the head's token. Then Teardown,
// although told to keep the cluster, stops the head, driver and worker
// (checkTornDownEvenWhenKept): a private head is the step's alone.
func TestPrivateHeadExposure(t *testing.T) {
	t.Parallel()
	b := &local.Backend{Head: rayhead.Options{RayBin: raytest.RayBin(t), NumCPUs: 1}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := b.Provision(ctx, runner.Step{ID: "raystep-x-0123456789ab"}, runner.Discard)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	t.Cleanup(func() { _ = c.Teardown(context.Background(), false) })
	d, err := c.Dashboard(ctx)
	if err != nil {
		t.Fatalf("Dashboard: %v", err)
	}
	if d.Token == "" {
		t.Fatalf("Dashboard() = %+v: a private head has no token", d)
	}
	jobs, err := raysubmit.New(raysubmit.Config{BaseURL: d.URL, Token: d.Token})
	if err != nil {
		t.Fatal(err)
	}
	const up = "driver and worker up"
	sub, err := jobs.Submit(ctx, raysubmit.SubmitRequest{Entrypoint: `python -c "import ray, time; ray.init(); ` +
		`ray.get(ray.remote(lambda: 1).remote()); print('` + up + `', flush=True); time.sleep(600)"`})
	if err != nil {
		t.Fatalf("submit with the head's token: %v", err)
	}
	waitForLine(ctx, t, jobs, sub.SubmissionID, up)
	pgid, dir := headGroup(t, c.Name())
	ls := listeners(t, headProcesses(t, pgid, dir))
	t.Logf("listeners of the head's processes: %v", ls)
	comms := map[string]bool{}
	for _, l := range ls {
		comms[l.comm] = true
		if !l.ip.IsLoopback() {
			t.Errorf("%s listens beyond loopback", l)
		}
	}
	// comm holds the first 15 bytes of a process's name.
	for _, want := range []string{"gcs_server", "raylet", "ray::JobSupervi"} {
		if !comms[want] {
			t.Errorf("no listener of %s among %v", want, ls)
		}
	}
	if info, err := os.Stat(filepath.Join(dir, "auth_token")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v; want mode 0600", info, err)
	}
	for _, tt := range []struct{ method, path, auth string }{
		{http.MethodGet, "/api/version", ""},
		{http.MethodPost, "/api/jobs/", ""},
		{http.MethodPost, "/api/jobs/", "Bearer not-the-token"},
	} {
		if status := request(t, tt.method, d.URL+tt.path, tt.auth); status != http.StatusUnauthorized && status != http.StatusForbidden {
			t.Errorf("%s %s with Authorization %q: status %d, want 401 or 403", tt.method, tt.path, tt.auth, status)
		}
	}
	checkTornDownEvenWhenKept(ctx, t, c)
}

// errSeen stops FollowLines once the awaited line came.
var errSeen = errors.New("line seen")

// waitForLine follows the job's log until a line equals want.
func waitForLine(ctx context.Context, t *testing.T, c *raysubmit.Client, id, want string) {
	t.Helper()
	var log []string
	err := c.FollowLines(ctx, id, func(line []byte) error {
		log = append(log, string(line))
		if string(line) == want {
			return errSeen
		}
		return nil
	}, nil)
	if !errors.Is(err, errSeen) {
		t.Fatalf("job %s ended without printing %q (%v); its log:\n%s", id, want, err, strings.Join(log, "\n"))
	}
}

// headGroup finds the private head whose GCS is at gcs: the process group
// of `ray start` (which every Ray process of the head mentions by the GCS
// port) and the --temp-dir it was given.
func headGroup(t *testing.T, gcs string) (pgid int, dir string) {
	t.Helper()
	port := gcs[strings.LastIndex(gcs, ":"):]
	for _, pid := range processesMentioning(t, "--port="+port[1:]) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			if v, ok := strings.CutPrefix(arg, "--temp-dir="); ok {
				return pid, v
			}
		}
	}
	t.Fatalf("no `ray start` with --port=%s", port[1:])
	return 0, ""
}

// request sends one request over loopback and returns its status.
func request(t *testing.T, method, url, auth string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
