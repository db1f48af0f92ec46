package rayhead

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// A private head is reachable from this machine only, and asks for a token.
//
// Ray turns --node-ip-address=127.0.0.1 into the machine's routable address
// (services.resolve_ip_for_localhost) unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER
// is 0, and then binds gcs_server, raylet, the object manager, the core
// workers and the dashboard agent's servers on all interfaces. With the
// variable at 0 the node keeps 127.0.0.1 and every one of them, Python and
// C++, binds to loopback; the variable reaches the driver through the
// raylet's environment, so its ray.init() finds the node by the same
// address. Clients outside the head's environment (a `ray status` typed in
// a shell) would look for the node under the machine's address, which is
// why raystep never sends them to a private head.
//
// Token auth (Options.TokenAuth) adds a check that loopback alone does
// not give on a machine shared with other users: the dashboard, its agent
// and the runtime env agent answer 401 without the token, and Ray's gRPC
// servers refuse calls without it.

// loopbackEnv is the environment that keeps a head on host bound to
// loopback; nothing when host is not a loopback address.
func loopbackEnv(host string) []string {
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil
	}
	return []string{"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0"}
}

// ClientEnv is what a Ray client on this machine (a driver's ray.init(),
// `ray status`) needs besides RAY_ADDRESS to use a private head on host
// whose token is in tokenFile: the loopback setting above and token auth
// read from the file, so that the token itself never shows.
func ClientEnv(host, tokenFile string) []string {
	env := loopbackEnv(host)
	if tokenFile != "" {
		env = append(env, "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN_PATH="+tokenFile)
	}
	return env
}

// Env is the environment for a ray process that talks to a head on host:
// `ray start` itself, or Ray's Python asked about a cluster. It is this
// process's environment minus RAY_ADDRESS, with ray's interpreter first on
// PATH, Ray's usage stats and (unless RAY_AUTH_MODE is set) token auth
// off, loopback binding when host is a loopback address, and extra last,
// so that extra wins over all of it.
func Env(rayBin, host string, extra ...string) []string {
	return headEnv(rayBin, append(loopbackEnv(host), extra...))
}

// tokenFile is the name of the token file in a head's temp dir.
const tokenFile = "auth_token"

// startEnv is the environment of `ray start`: Env, headMark, TMPDIR
// (pythonTempDir) and, with opts.TokenAuth, a new token written to a 0600
// file that Ray reads through RAY_AUTH_TOKEN_PATH. opts.Env comes last.
func (h *Head) startEnv(rayBin string, opts Options) ([]string, error) {
	var extra []string
	if opts.TokenAuth {
		path, token, err := writeToken(h.tempDir)
		if err != nil {
			return nil, err
		}
		h.token = token
		// RAY_AUTH_TOKEN would win over the path; empty, Ray skips it.
		extra = append(extra, "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN=", "RAY_AUTH_TOKEN_PATH="+path)
	}
	// Ray gives its dashboard a fixed 60 s to come up and then exits with
	// "Failed to start the dashboard"; a busy machine needs longer, and
	// waitReady already bounds the wait, so Ray's own bound follows ours
	// unless the user set one.
	if _, set := os.LookupEnv(dashboardStartupEnv); !set {
		extra = append(extra, dashboardStartupEnv+"="+strconv.Itoa(dashboardStartupSeconds(opts.readyTimeout())))
	}
	if dir, err := h.pythonTempDir(); err != nil {
		return nil, err
	} else if dir != "" {
		extra = append(extra, "TMPDIR="+dir)
	}
	// exec.Cmd uses the last value of a repeated key, so these win over
	// headEnv's defaults and the inherited environment: a DASHBOARD_METRIC_PORT
	// the user set is their own Ray head's, not this one's.
	extra = append(extra, headMark+"="+h.tempDir, dashboardMetricsEnv+"="+strconv.Itoa(h.metricsPort))
	return Env(rayBin, h.host, append(extra, opts.Env...)...), nil
}

// pythonTempDir makes the directory that the head's processes get as
// TMPDIR, and returns it; "" when they keep the inherited one.
//
// Ray's Python processes make temp files of their own: the dashboard's
// multiprocessing forkserver a /tmp/pymp-* dir with its socket, which
// Python removes only at a normal exit. A head is stopped with signals, so
// every head left one behind, and a machine that runs a local step a day
// gathered one a day. In a dir inside the head's own temp dir they go with
// it. That holds for a temp dir raystep made (and removes) only, and when
// the user has not chosen a TMPDIR: their jobs' temp files stay where they
// put them.
func (h *Head) pythonTempDir() (string, error) {
	if !h.ownsTempDir || os.Getenv("TMPDIR") != "" {
		return "", nil
	}
	dir := filepath.Join(h.tempDir, "tmp")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create the ray head's TMPDIR: %w", err)
	}
	return dir, nil
}

// dashboardMetricsEnv is the variable that sets the port of the dashboard's
// Prometheus server (Ray's default: a fixed 44227).
const dashboardMetricsEnv = "DASHBOARD_METRIC_PORT"

// dashboardStartupEnv is the variable that bounds how long `ray start`
// waits for its dashboard process to register (Ray's default: 60 s).
const dashboardStartupEnv = "RAY_DASHBOARD_STARTUP_TIMEOUT_S"

// dashboardStartupSeconds is Ray's bound for a head raystep waits ready
// for: whole seconds, rounded up, so Ray never gives up before raystep does.
func dashboardStartupSeconds(ready time.Duration) int {
	return int((ready + time.Second - 1) / time.Second)
}

// writeToken writes a fresh random token to dir/auth_token, readable by
// this user only, and returns the file and the token.
func writeToken(dir string) (path, token string, err error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", "", fmt.Errorf("make ray auth token: %w", err)
	}
	token = hex.EncodeToString(buf)
	path = filepath.Join(dir, tokenFile)
	// A file left by an earlier start in the same dir is replaced, so
	// O_EXCL makes sure the new one has mode 0600.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("replace ray auth token %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("write ray auth token: %w", err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		_ = f.Close()
		return "", "", fmt.Errorf("write ray auth token %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", "", fmt.Errorf("write ray auth token %s: %w", path, err)
	}
	return path, token, nil
}
