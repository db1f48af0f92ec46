package rayhead

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// killStragglers SIGKILLs the processes of the head whose temp dir is dir
// (headFinder). It reads /proc and does nothing elsewhere.
func killStragglers(dir string) {
	f := newHeadFinder(dir)
	f.kill()
	f.close()
}

// headMark is set, to the head's temp dir, in the environment of `ray
// start`, so that a process of the head that names the temp dir neither on
// its command line nor by its process group (a driver in a session of its
// own) is still found, unless it replaced its environment.
const headMark = "RAYSTEP_HEAD_DIR"

// headFinder finds the processes of a head whose keeper is gone: those
// whose command line mentions dir (unique to one head) or whose
// environment has headMark set to dir, and the members of the process
// group of `ray start`, whose pid the keeper wrote into dir's lock file:
// Ray's dashboard modules and agents, whose titles overwrote their command
// line and environment, are found only so. The group counts once one of
// its processes was seen to mention dir, so that a reused pid never does.
type headFinder struct {
	dir       string
	mark      []byte
	group     int
	confirmed bool
	// killed holds a handle of every process kill signalled, by pid, so
	// that its exit can be awaited: an exiting process's command line and
	// environment read empty, so find no longer sees it, well before it
	// is gone.
	killed map[int]procHandle
}

func newHeadFinder(dir string) *headFinder {
	f := &headFinder{dir: dir, mark: []byte(headMark + "=" + dir + "\x00")}
	if b, err := os.ReadFile(filepath.Join(dir, lockName)); err == nil {
		f.group, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return f
}

// find returns the command lines, by pid, of the head's live processes
// other than this one.
func (f *headFinder) find() map[int]string {
	out, members := map[int]string{}, map[int]string{}
	entries, err := os.ReadDir("/proc")
	if err != nil || f.dir == "" {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		state, pgrp := procState(pid)
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || state == "Z" || state == "" {
			continue
		}
		s := string(cmdline)
		cmd := strings.TrimSpace(strings.ReplaceAll(s, "\x00", " "))
		switch {
		case strings.Contains(s, f.dir+"/") || strings.Contains(s, f.dir+"\x00") || hasEnv(pid, f.mark):
			out[pid] = cmd
			f.confirmed = f.confirmed || (f.group > 0 && pgrp == f.group)
		case f.group > 0 && pgrp == f.group:
			members[pid] = cmd
		}
	}
	if f.confirmed {
		for pid, cmd := range members {
			out[pid] = cmd
		}
	}
	return out
}

// kill SIGKILLs what find finds and returns it. Each process is
// signalled through a handle that f keeps until close.
func (f *headFinder) kill() map[int]string {
	left := f.find()
	for pid := range left {
		h, ok := f.killed[pid]
		if !ok {
			var err error
			if h, err = openProc(pid); err != nil {
				continue // gone already
			}
			if f.killed == nil {
				f.killed = map[int]procHandle{}
			}
			f.killed[pid] = h
		}
		_ = h.signal(syscall.SIGKILL)
	}
	return left
}

// handles returns the handles of the processes kill signalled.
func (f *headFinder) handles() []procHandle {
	hs := make([]procHandle, 0, len(f.killed))
	for _, h := range f.killed {
		hs = append(hs, h)
	}
	return hs
}

// close closes the handles kill opened.
func (f *headFinder) close() {
	for pid, h := range f.killed {
		h.close()
		delete(f.killed, pid)
	}
}

// procState returns pid's state letter and process group from
// /proc/PID/stat; "" if it cannot be read.
func procState(pid int) (state string, pgrp int) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	fields := strings.Fields(rest) // state ppid pgrp ...
	if len(fields) < 3 {
		return "", 0
	}
	pgrp, _ = strconv.Atoi(fields[2])
	return fields[0], pgrp
}

// hasEnv reports whether pid's environment holds the entry kv (with its
// trailing NUL).
func hasEnv(pid int, kv []byte) bool {
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	return err == nil && (bytes.HasPrefix(env, kv) || bytes.Contains(env, append([]byte{0}, kv...)))
}

// headEnv is this process's environment minus RAY_ADDRESS, with the ray
// executable's directory first on PATH so entrypoints such as
// `python train.py` run with the interpreter Ray was installed into.
func headEnv(rayBin string, extra []string) []string {
	// The directory of ray's own interpreter goes first on PATH, so that an
	// entrypoint's "python" is the one Ray runs on, also when ray is a
	// symlink or a copy outside its virtualenv.
	binDir := filepath.Dir(Interpreter(rayBin))
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
	// Ray 2.60 turns token auth on for every new head once a token sits in
	// ~/.ray/auth_token (a plain ray.init() writes one), with a token
	// raystep's client does not know. A head without Options.TokenAuth
	// (startEnv) therefore runs without it unless the user chose a mode.
	if _, set := os.LookupEnv("RAY_AUTH_MODE"); !set {
		env = append(env, "RAY_AUTH_MODE=disabled")
	}
	if _, err := os.Stat(filepath.Join(binDir, "..", "pyvenv.cfg")); err == nil {
		env = append(env, "VIRTUAL_ENV="+filepath.Dir(binDir))
	}
	return append(env, extra...)
}

// Interpreter returns the Python named by the ray script's #! line, else
// the python next to it.
func Interpreter(rayBin string) string {
	f, err := os.Open(rayBin)
	if err == nil {
		defer f.Close()
		buf := make([]byte, 512)
		n, _ := f.Read(buf)
		if line, _, _ := bytes.Cut(buf[:n], []byte("\n")); bytes.HasPrefix(line, []byte("#!")) {
			if fields := strings.Fields(string(line[2:])); len(fields) == 1 && filepath.IsAbs(fields[0]) {
				return fields[0]
			}
		}
	}
	return filepath.Join(filepath.Dir(rayBin), "python")
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
