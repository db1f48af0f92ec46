// Package rayhead launches a private Ray head on this machine and owns every
// process of it until it is stopped. raystep's local backend (runner/local)
// starts one per step; tests reach the same code through test/raytest.
// It knows nothing of steps or the Jobs API: raysubmit talks to the head it
// starts, runner/local decides when to start and stop one.
//
// Start runs `ray start --head --block` under a keeper process (keeper.py),
// bound to loopback with a free port for every listener Ray opens (the
// dashboard agent's HTTP server picks its own) and a private temp dir, and
// waits until the head is ready (waitReady). The keeper is a
// child subreaper, so every process started for the head, drivers and
// workers that leave its process group and session included, stays in its
// tree; Head.Stop has it kill exactly that tree, and it does so by itself
// when raystep is gone, even SIGKILLed.
//
// A detached head (Options.Detach, Head.Detach; detach.go) is the one
// exception: its keeper outlives raystep and stops the head at the expiry
// in a record file instead, and later processes reach it through Detached.
package rayhead

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ErrRayNotFound is returned when no ray executable can be located.
var ErrRayNotFound = errors.New(`ray executable not found: run "make venv" in the raystep checkout or ` +
	`pip install "ray[default]==2.60.0", or set RAYSTEP_RAY_BIN`)

// Options configures Start. The zero value starts a head with the ray
// found by FindRay, a fresh temp dir under /tmp and loopback networking.
type Options struct {
	// RayBin is the ray executable; empty means FindRay("").
	RayBin string
	// TempDir is Ray's root temp dir. Empty means a fresh short dir under
	// /tmp that Stop removes. Keep it short: Ray puts unix sockets under it
	// and socket paths are limited to about 107 bytes.
	TempDir string
	// Host is the address every listener binds to; empty means 127.0.0.1.
	Host string
	// NumCPUs is the head's logical CPU count; 0 lets Ray detect it.
	NumCPUs int
	// ObjectStoreMemory is the object store size in bytes; 0 means 100 MiB,
	// which keeps /dev/shm use small on shared machines.
	ObjectStoreMemory int64
	// Env holds extra KEY=VALUE entries for the head's environment, which
	// otherwise inherits this process's environment minus RAY_ADDRESS.
	Env []string
	// Stdout and Stderr receive the output of `ray start`; nil discards it.
	// The last part of the output is also kept for error messages.
	Stdout, Stderr io.Writer
	// Logger receives progress messages; nil means no logging.
	Logger *zap.Logger
	// Warn, if set, is told what the person waiting on the head should
	// know: that a head that did not start is started again, and why.
	// Without it such warnings go to Logger.
	Warn func(msg string)
	// ReadyTimeout bounds the wait for the dashboard; 0 means 4 minutes (a busy machine starts a head slowly).
	ReadyTimeout time.Duration
	// StopTimeout is how long the head's processes get after SIGTERM before
	// they are SIGKILLed; 0 means 15s.
	StopTimeout time.Duration
	// TokenAuth turns on Ray's token authentication with a fresh random
	// token (Head.Token), kept in a 0600 file in the temp dir. Without it
	// the head runs with token auth off, whatever ~/.ray/auth_token holds,
	// unless RAY_AUTH_MODE is set.
	TokenAuth bool
	// Detach, when set, starts a head that can outlive this process: see
	// DetachOptions and Head.Detach. Stdout and Stderr are then unused.
	Detach *DetachOptions
	// Monitor starts Ray's autoscaler monitor, which `ray status` and the
	// dashboard's cluster status read: for a head people work on. A
	// head on one machine has nothing to scale, and a step reads none of
	// it, so by default the head goes without it (`--no-monitor`): one
	// Python process less to start and to keep polling.
	Monitor bool

	// tempRoot replaces tempRoot, for tests: the sweep of stale temp dirs
	// that every Start runs then leaves a test's dirs to that test.
	tempRoot string
	// stall replaces startStall, for tests.
	stall time.Duration
}

// Head is a running Ray head started by Start.
type Head struct {
	keeper      *keeper
	out         fmt.Stringer // the last part of the output of `ray start`
	tempDir     string
	ownsTempDir bool
	host        string
	gcsPort     int
	dashPort    int
	clientPort  int
	// metricsPort is the dashboard's Prometheus server's, passed in the
	// environment (startEnv): `ray start` has no flag for it.
	metricsPort int
	token       string
	logger      *zap.Logger
	stopTimeout time.Duration
	stopOnce    sync.Once
	stopErr     error
}

// DashboardURL returns the dashboard's base URL, e.g. http://127.0.0.1:41234.
func (h *Head) DashboardURL() string {
	return "http://" + net.JoinHostPort(h.host, strconv.Itoa(h.dashPort))
}

// Address returns the GCS address (host:port), the value for RAY_ADDRESS.
func (h *Head) Address() string {
	return net.JoinHostPort(h.host, strconv.Itoa(h.gcsPort))
}

// ClientAddress returns the Ray Client address, ray://host:port.
func (h *Head) ClientAddress() string {
	return "ray://" + net.JoinHostPort(h.host, strconv.Itoa(h.clientPort))
}

// Token returns the head's authentication token; empty without
// Options.TokenAuth.
func (h *Head) Token() string { return h.token }

// TempDir returns Ray's root temp dir for this head (sessions and logs live under it).
func (h *Head) TempDir() string { return h.tempDir }

// Pid returns the process id of `ray start`, which leads the head's
// process group; 0 if it never ran.
func (h *Head) Pid() int { return h.keeper.rayPid }

// Output returns the last part of the output of `ray start`.
func (h *Head) Output() string { return h.out.String() }

// Start starts a Ray head and returns once `ray start` said the node is
// up, the dashboard answers GET /api/version and the Ray Client server
// accepts connections (waitReady). On any failure it stops what it
// started. A head that dies because another process took one of its ports
// meanwhile, or goes on without the dashboard whose port was taken, or
// whose raylet did not register with the GCS within Ray's fixed 30 s (a
// busy machine), or whose `ray start` hung without saying its node is up
// (startStall), or whose raylet exited before its node was up
// (rayletWatch: at once, not after Ray's 30 s), is started again, twice
// at most. Heads take turns to
// start (StartSlots at once on a machine); the wait for a turn is bounded
// by ctx, not by ReadyTimeout.
func Start(ctx context.Context, opts Options) (*Head, error) {
	rayBin, err := FindRay(opts.RayBin)
	if err != nil {
		return nil, err
	}
	if opts.TempDir == "" {
		sweepStale(opts.root(), opts.Logger)
	}
	for attempt := 1; ; attempt++ {
		h, err := startHeadInTurn(ctx, rayBin, opts)
		if err == nil || !errors.Is(err, errRetryable) || attempt == 3 {
			return h, err
		}
		opts.warn(fmt.Sprintf("ray head did not start (attempt %d of 3); starting it again: %s", attempt, brief(err)))
	}
}

// readyTimeout is ReadyTimeout, or 4 minutes when it is 0.
func (o Options) readyTimeout() time.Duration {
	if o.ReadyTimeout == 0 {
		return 4 * time.Minute
	}
	return o.ReadyTimeout
}

// startStall is how long `ray start` may take to say its node is up
// before the attempt counts as hung and the head is started again. Ray's
// own steps time out after 30 s each; a busy machine prints the mark in
// 10–40 s. A `ray start` stuck inside Node() for minutes was seen on a
// stressed CI machine: it never printed more than its first two lines.
const startStall = 90 * time.Second

func (o Options) startStall() time.Duration {
	if o.stall != 0 {
		return o.stall
	}
	return startStall
}

// warn tells Warn, else Logger, about msg.
func (o Options) warn(msg string) {
	switch {
	case o.Warn != nil:
		o.Warn(msg)
	case o.Logger != nil:
		o.Logger.Warn(msg)
	}
}

// tempRoot holds private heads' temp dirs. Not os.TempDir(): Ray's unix
// socket paths under it must stay short.
const tempRoot = "/tmp"

// root is the directory that holds the head's fresh temp dir.
func (o Options) root() string {
	if o.tempRoot != "" {
		return o.tempRoot
	}
	return tempRoot
}

// errRetryable marks a head that exited while starting for a reason a new
// start may not meet: a port taken meanwhile, or a raylet that registered
// too late on a busy machine.
var errRetryable = errors.New("ray head failed to start")

// startedMark is what `ray start` prints once its node registered with
// the GCS; before that, a dashboard may answer for a node that never comes
// up.
const startedMark = "Ray runtime started."

// startHeadInTurn is startHead once one of StartSlots is free.
func startHeadInTurn(ctx context.Context, rayBin string, opts Options) (*Head, error) {
	release, waited, err := takeStartSlot(ctx, slotRoot, StartSlots())
	if err != nil {
		return nil, err
	}
	defer release()
	if waited && opts.Logger != nil {
		opts.Logger.Info("ray head starts after another one on this machine finished starting")
	}
	return startHead(ctx, rayBin, opts)
}

func startHead(ctx context.Context, rayBin string, opts Options) (*Head, error) {
	h := &Head{
		host:        opts.Host,
		logger:      opts.Logger,
		stopTimeout: opts.StopTimeout,
	}
	if h.host == "" {
		h.host = "127.0.0.1"
	}
	if h.stopTimeout == 0 {
		h.stopTimeout = 15 * time.Second
	}
	if h.logger == nil {
		h.logger = zap.NewNop()
	}
	lock, err := h.makeTempDir(opts.TempDir, opts.root())
	if err != nil {
		return nil, err
	}
	if lock != nil {
		defer lock.Close() // the keeper holds its own copy of the lock
	}
	args, err := h.startArgs(opts)
	if err != nil {
		h.removeTempDir()
		return nil, err
	}
	env, err := h.startEnv(rayBin, opts)
	if err != nil {
		h.removeTempDir()
		return nil, err
	}
	stdout, stderr, closeLog, err := h.outputs(opts)
	if err != nil {
		h.removeTempDir()
		return nil, err
	}
	spec := keeperSpec{rayBin: rayBin, args: args, env: env, stdout: stdout, stderr: stderr,
		grace: h.stopTimeout, lock: lock}
	if h.ownsTempDir {
		spec.removeDir = h.tempDir
	}
	if opts.Detach != nil {
		spec.record = opts.Detach.Record
	}
	h.logger.Info("starting ray head", zap.String("ray", rayBin), zap.Strings("args", args))
	h.keeper, err = startKeeper(spec)
	closeLog() // the keeper holds its own copy
	if err != nil {
		h.removeTempDir()
		return nil, err
	}
	if err := h.waitReady(ctx, opts.readyTimeout(), opts.startStall()); err != nil {
		stopErr := h.Stop(context.WithoutCancel(ctx))
		return nil, errors.Join(err, stopErr)
	}
	h.logger.Info("ray head ready", zap.String("dashboard", h.DashboardURL()), zap.String("gcs", h.Address()))
	return h, nil
}

// makeTempDir sets the head's temp dir: dir, or a fresh one under root
// with a held lock that marks it as this head's while its keeper lives.
func (h *Head) makeTempDir(dir, root string) (*os.File, error) {
	h.tempDir, h.ownsTempDir = dir, dir == ""
	if !h.ownsTempDir {
		return nil, nil
	}
	var err error
	if h.tempDir, err = os.MkdirTemp(root, "rs"); err != nil {
		return nil, fmt.Errorf("create ray temp dir: %w", err)
	}
	lock, err := lockTempDir(h.tempDir)
	if err != nil {
		h.removeTempDir()
		return nil, err
	}
	return lock, nil
}

// startArgs builds the `ray start` arguments, with a free port for every
// fixed-port listener but the dashboard agent's HTTP server, which binds a
// port of its own choosing (--dashboard-agent-listen-port=0; Ray's default
// is a fixed 52365). Worker ports are left to the kernel (min=max=0).
// The dashboard's own Prometheus server gets a reserved port too, through
// startEnv: its default is a fixed 44227, so every head after the first on
// a machine went without it, and a raystep head holding it took it from the
// user's own Ray head.
//
// A reserved port is released before Ray binds it. The dashboard agent
// binds its HTTP port last, seconds after the dashboard answers (a minute
// on a busy machine), and when another process took that port meanwhile
// it stays alive without its HTTP server and never registers: the head
// looks ready while every submit meets "No available agent to submit
// job". The other ports stay reserved: a process that cannot bind one
// exits and `ray start` stops the head, and when the runtime env agent's
// port is left to Ray (Ray 2.60), the Ray Client server waits for the
// raylet to register, within a fixed 30 s a busy machine overruns, and
// then exits, taking the head with it.
//
// Whatever the agent's port, Ray 2.60's raylet waits for the agent to
// write it to a file, within a fixed 15 s (RAY_agent_register_timeout_ms
// does not change it), and exits when it does not: on a machine too busy
// for the agent to start in that time, the attempt ends there and
// rayletWatch sees it at once (checked with an agent slowed to 40 s).
func (h *Head) startArgs(opts Options) ([]string, error) {
	ports, err := freePorts(h.host, 9)
	if err != nil {
		return nil, fmt.Errorf("reserve ports for ray head: %w", err)
	}
	h.gcsPort, h.dashPort, h.clientPort, h.metricsPort = ports[0], ports[1], ports[2], ports[8]
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	store := opts.ObjectStoreMemory
	if store == 0 {
		store = 100 << 20
	}
	args := []string{
		"start", "--head", "--block", "--disable-usage-stats",
		"--node-ip-address=" + h.host,
		"--port=" + p(0),
		"--include-dashboard=true",
		"--dashboard-host=" + h.host,
		"--dashboard-port=" + p(1),
		"--ray-client-server-port=" + p(2),
		"--node-manager-port=" + p(3),
		"--object-manager-port=" + p(4),
		"--dashboard-agent-listen-port=0",
		"--dashboard-agent-grpc-port=" + p(5),
		"--runtime-env-agent-port=" + p(6),
		"--metrics-export-port=" + p(7),
		"--min-worker-port=0", "--max-worker-port=0",
		"--object-store-memory=" + strconv.FormatInt(store, 10),
		"--temp-dir=" + h.tempDir,
		"--log-style=record", "--log-color=false",
	}
	if !opts.Monitor {
		args = append(args, "--no-monitor")
	}
	if opts.NumCPUs > 0 {
		args = append(args, "--num-cpus="+strconv.Itoa(opts.NumCPUs))
	}
	return args, nil
}

// waitReady polls until `ray start` said its node is up, GET /api/version
// answers 200 and the Ray Client server accepts connections, or the
// process exits, the timeout passes or ctx ends. A `ray start` that has
// not said its node is up within stall is hung, and one that said it could
// not bind a port (Ray goes on without a dashboard whose port was taken)
// will never be ready: those errors are retryable.
//
// The Ray Client server binds its port (one startArgs reserved and
// released) seconds after the dashboard, and when that port was taken
// meanwhile it exits before `ray start` says its node is up; `ray start`
// only notices on its next look at its processes, a second later, and
// then stops the head. Without the Ray Client check the head counted as
// ready in that second and died under the step instead of being started
// again.
func (h *Head) waitReady(ctx context.Context, timeout, stall time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stalled := time.NewTimer(stall)
	defer stalled.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	url := h.DashboardURL() + "/api/version"
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	raylet := &rayletWatch{parent: h.keeper.rayPid, logs: filepath.Join(h.tempDir, "session_latest", "logs")}
	for {
		if strings.Contains(h.Output(), startedMark) && versionOK(ctx, client, url, h.token) &&
			accepts(ctx, net.JoinHostPort(h.host, strconv.Itoa(h.clientPort))) {
			if lost := h.agentLostItsPort(); lost != "" {
				return withOutput(fmt.Errorf("%w: a Ray agent could not bind its port (%s), and its raylet stops with it",
					errRetryable, lost), h.Output())
			}
			return nil
		}
		select {
		case <-h.keeper.done:
			out := h.Output()
			err := fmt.Errorf("ray head exited while starting (%s)", h.keeper.exitText())
			if lost := h.agentLostItsPort(); lost != "" {
				err = fmt.Errorf("%w: %w; a Ray agent could not bind its port (%s)", errRetryable, err, lost)
			} else if retryableStart(out) {
				err = fmt.Errorf("%w: %w", errRetryable, err)
			}
			return withOutput(err, out)
		case <-ctx.Done():
			return withOutput(fmt.Errorf("wait for ray dashboard %s: %w", url, context.Cause(ctx)), h.Output())
		case <-stalled.C:
			if out := h.Output(); !strings.Contains(out, startedMark) {
				return withOutput(fmt.Errorf("%w: `ray start` did not say %q within %s",
					errRetryable, startedMark, stall), out)
			}
		case <-tick.C:
			// Ray says so and goes on without its dashboard when the
			// dashboard's port was taken: no answer would ever come. A
			// raylet that registered too late is seen here too, when
			// `ray start` printed why before it exits.
			out := h.Output()
			if retryableStart(out) {
				why := "`ray start` failed to start the head"
				if strings.Contains(out, startedMark) {
					why = "`ray start` could not start part of the head and went on without it"
				}
				return withOutput(fmt.Errorf("%w: %s", errRetryable, why), out)
			}
			if !strings.Contains(out, startedMark) {
				if err := raylet.exited(h.agentLostItsPort); err != nil {
					return withOutput(err, out)
				}
			}
		}
	}
}

// agentErrFiles are where the head's agents write what they print on
// stderr, under its session's log dir.
var agentErrFiles = []string{"runtime_env_agent.err", "dashboard_agent.err"}

// agentLostItsPort returns the file of an agent of the head that could
// not bind its port (another process took the port startArgs reserved and
// released), or "". The raylet fate-shares with its agents: it exits a
// moment later, and `ray start` stops the head ten seconds after that,
// saying only that "one Ray agent failed", which may be a broken install
// as well. Meanwhile the dashboard answers and the head looked ready.
func (h *Head) agentLostItsPort() string {
	logs := filepath.Join(h.tempDir, "session_latest", "logs")
	for _, name := range agentErrFiles {
		data, err := os.ReadFile(filepath.Join(logs, name))
		if err == nil && bytes.Contains(data, []byte("Address already in use")) {
			return filepath.Join(logs, name)
		}
	}
	return ""
}

// accepts reports whether a TCP connection to addr is accepted.
func accepts(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func versionOK(ctx context.Context, client *http.Client, url, token string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop stops the head: its keeper SIGTERMs every process started for it
// (also those that left its process group or session), SIGKILLs what is
// left once the StopTimeout passes, and removes a temp dir Start
// created. Stop returns nil only once the keeper confirmed all of that; it
// names each process that survived and each thing it could not remove. If
// ctx ends first, Stop returns and the keeper carries on alone. Calling
// Stop again returns the first result.
func (h *Head) Stop(ctx context.Context) error {
	h.stopOnce.Do(func() { h.stopErr = h.stop(ctx) })
	return h.stopErr
}

func (h *Head) stop(ctx context.Context) error {
	h.logger.Info("stopping ray head", zap.Int("keeper", h.keeper.pid))
	h.keeper.stop()
	select {
	case <-h.keeper.done:
		return h.keeper.result()
	case <-ctx.Done():
		return fmt.Errorf("ray head keeper (pid %d) has not confirmed that the head is gone: %w; "+
			"it goes on stopping it", h.keeper.pid, context.Cause(ctx))
	}
}

// Done is closed once the head has ended, by Stop or by itself, and its
// keeper has killed everything it started.
func (h *Head) Done() <-chan struct{} { return h.keeper.done }

func (h *Head) removeTempDir() {
	if h.ownsTempDir && h.tempDir != "" {
		_ = os.RemoveAll(h.tempDir)
	}
}
