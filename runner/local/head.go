// Package local is raystep's embedded backend: a Ray head started and owned by
// the step on this machine (or an existing cluster named by RAY_ADDRESS).
//
// This file owns the one mechanism that launches a head: StartHead runs
// `ray start --head --block` in its own process group, bound to loopback with
// a free port for every listener Ray opens and a private temp dir, waits until
// the dashboard answers, and Head.Stop stops exactly the processes it started.
// Tests reach the same code through test/raytest.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// ErrRayNotFound is returned when no ray executable can be located.
var ErrRayNotFound = errors.New(`ray executable not found: run "make venv" in the raystep checkout or ` +
	`pip install "ray[default]==2.60.0", or set RAYSTEP_RAY_BIN`)

// HeadOptions configures StartHead. The zero value starts a head with the ray
// found by FindRay, a fresh temp dir under /tmp and loopback networking.
type HeadOptions struct {
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
	// ReadyTimeout bounds the wait for the dashboard; 0 means 2 minutes.
	ReadyTimeout time.Duration
	// StopTimeout bounds the graceful part of Stop before SIGKILL; 0 means 15s.
	StopTimeout time.Duration
}

// Head is a running Ray head started by StartHead.
type Head struct {
	cmd         *exec.Cmd
	done        chan struct{} // closed when the ray start process has exited
	waitErr     error
	tail        *tailBuffer
	tempDir     string
	ownsTempDir bool
	host        string
	gcsPort     int
	dashPort    int
	clientPort  int
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

// TempDir returns Ray's root temp dir for this head (sessions and logs live under it).
func (h *Head) TempDir() string { return h.tempDir }

// Pid returns the process id of `ray start`, which leads the head's process group.
func (h *Head) Pid() int { return h.cmd.Process.Pid }

// Output returns the last part of the output of `ray start`.
func (h *Head) Output() string { return h.tail.String() }

// StartHead starts a Ray head and returns once its dashboard answers
// GET /api/version. On any failure it stops what it started.
func StartHead(ctx context.Context, opts HeadOptions) (*Head, error) {
	rayBin, err := FindRay(opts.RayBin)
	if err != nil {
		return nil, err
	}
	h := &Head{
		done:        make(chan struct{}),
		tail:        newTailBuffer(16 << 10),
		host:        orDefault(opts.Host, "127.0.0.1"),
		logger:      opts.Logger,
		stopTimeout: opts.StopTimeout,
	}
	if h.logger == nil {
		h.logger = zap.NewNop()
	}
	if h.stopTimeout == 0 {
		h.stopTimeout = 15 * time.Second
	}
	h.tempDir, h.ownsTempDir = opts.TempDir, opts.TempDir == ""
	if h.ownsTempDir {
		if h.tempDir, err = os.MkdirTemp("/tmp", "rs"); err != nil {
			return nil, fmt.Errorf("create ray temp dir: %w", err)
		}
	}
	args, err := h.startArgs(opts)
	if err != nil {
		h.removeTempDir()
		return nil, err
	}
	h.cmd = exec.Command(rayBin, args...)
	h.cmd.Env = headEnv(rayBin, opts.Env)
	h.cmd.Stdout = writers(h.tail, opts.Stdout)
	h.cmd.Stderr = writers(h.tail, opts.Stderr)
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	h.logger.Info("starting ray head", zap.String("ray", rayBin), zap.Strings("args", args))
	if err := h.cmd.Start(); err != nil {
		h.removeTempDir()
		return nil, fmt.Errorf("start %s: %w", rayBin, err)
	}
	go func() { h.waitErr = h.cmd.Wait(); close(h.done) }()
	if err := h.waitReady(ctx, orDuration(opts.ReadyTimeout, 2*time.Minute)); err != nil {
		stopErr := h.Stop(context.WithoutCancel(ctx))
		return nil, errors.Join(err, stopErr)
	}
	h.logger.Info("ray head ready", zap.String("dashboard", h.DashboardURL()), zap.String("gcs", h.Address()))
	return h, nil
}

// startArgs builds the `ray start` arguments, with a free port for every
// fixed-port listener. Worker ports are left to the kernel (min=max=0).
func (h *Head) startArgs(opts HeadOptions) ([]string, error) {
	ports, err := freePorts(h.host, 9)
	if err != nil {
		return nil, fmt.Errorf("reserve ports for ray head: %w", err)
	}
	h.gcsPort, h.dashPort, h.clientPort = ports[0], ports[1], ports[2]
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
		"--dashboard-agent-listen-port=" + p(5),
		"--dashboard-agent-grpc-port=" + p(6),
		"--runtime-env-agent-port=" + p(7),
		"--metrics-export-port=" + p(8),
		"--min-worker-port=0", "--max-worker-port=0",
		"--object-store-memory=" + strconv.FormatInt(store, 10),
		"--temp-dir=" + h.tempDir,
		"--log-style=record", "--log-color=false",
	}
	if opts.NumCPUs > 0 {
		args = append(args, "--num-cpus="+strconv.Itoa(opts.NumCPUs))
	}
	return args, nil
}

// waitReady polls GET /api/version until it answers 200, the process exits,
// the timeout passes or ctx ends.
func (h *Head) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	url := h.DashboardURL() + "/api/version"
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if versionOK(ctx, client, url) {
			return nil
		}
		select {
		case <-h.done:
			return fmt.Errorf("ray head exited before its dashboard answered (%v); output:\n%s", h.waitErr, h.Output())
		case <-ctx.Done():
			return fmt.Errorf("wait for ray dashboard %s: %w; output:\n%s", url, context.Cause(ctx), h.Output())
		case <-tick.C:
		}
	}
}

func versionOK(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop stops the head's process group: SIGTERM, then SIGKILL once the
// StopTimeout passes or ctx ends, then any process still running from the
// head's temp dir. It waits for `ray start` to exit and removes a temp dir
// StartHead created. Calling Stop again returns the first result.
func (h *Head) Stop(ctx context.Context) error {
	h.stopOnce.Do(func() { h.stopErr = h.stop(ctx) })
	return h.stopErr
}

func (h *Head) stop(ctx context.Context) error {
	pgid := h.cmd.Process.Pid
	h.logger.Info("stopping ray head", zap.Int("pgid", pgid))
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	timer := time.NewTimer(h.stopTimeout)
	defer timer.Stop()
	select {
	case <-h.done:
	case <-timer.C:
	case <-ctx.Done():
	}
	// Whatever is left in the group (or escaped it but still runs from our
	// temp dir) is killed outright.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-h.done
	killStragglers(h.tempDir)
	waitGroupGone(ctx, pgid, 5*time.Second)
	h.removeTempDir()
	return nil
}

// waitGroupGone waits, bounded, until no process of group pgid is left:
// SIGKILLed children are reaped by init shortly after they die.
func waitGroupGone(ctx context.Context, pgid int, bound time.Duration) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for syscall.Kill(-pgid, 0) == nil {
		select {
		case <-tick.C:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (h *Head) removeTempDir() {
	if h.ownsTempDir && h.tempDir != "" {
		_ = os.RemoveAll(h.tempDir)
	}
}

// killStragglers SIGKILLs processes whose command line mentions dir, which
// is unique to one head. It reads /proc and does nothing elsewhere.
func killStragglers(dir string) {
	entries, err := os.ReadDir("/proc")
	if err != nil || dir == "" {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if s := string(cmdline); strings.Contains(s, dir+"/") || strings.Contains(s, dir+"\x00") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// headEnv is this process's environment minus RAY_ADDRESS, with the ray
// executable's directory first on PATH so entrypoints such as
// `python train.py` run with the interpreter Ray was installed into.
func headEnv(rayBin string, extra []string) []string {
	binDir := filepath.Dir(rayBin)
	env := make([]string, 0, len(os.Environ())+len(extra)+2)
	path := binDir
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "RAY_ADDRESS="):
		case strings.HasPrefix(kv, "PATH="):
			path = binDir + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+path, "RAY_USAGE_STATS_ENABLED=0")
	if _, err := os.Stat(filepath.Join(binDir, "..", "pyvenv.cfg")); err == nil {
		env = append(env, "VIRTUAL_ENV="+filepath.Dir(binDir))
	}
	return append(env, extra...)
}

// FindRay locates the ray executable: explicit when set, else .venv/bin/ray
// in the working directory or one of its parents, else ray on PATH.
func FindRay(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("ray executable %s: %w", explicit, errors.Join(err, ErrRayNotFound))
		}
		return filepath.Abs(explicit)
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			cand := filepath.Join(dir, ".venv", "bin", "ray")
			if fi, err := os.Stat(cand); err == nil && !fi.IsDir() {
				return cand, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if p, err := exec.LookPath("ray"); err == nil {
		return filepath.Abs(p)
	}
	return "", ErrRayNotFound
}

// freePorts returns n distinct ports that were free on host: all are held
// open together so the kernel cannot hand out one twice.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func writers(tail io.Writer, w io.Writer) io.Writer {
	if w == nil {
		return tail
	}
	return io.MultiWriter(tail, w)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
