package rayhead

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// keeperScript is the head keeper (see keeper.py): a child subreaper
// between raystep and `ray start` that kills every process of the head and
// removes its temp dir when raystep says stop or is gone, however it died.
//
//go:embed keeper.py
var keeperScript string

// lockName is the file in a private head's temp dir that the keeper holds
// an flock on while it lives: a temp dir whose lock is free is stale.
const lockName = "raystep-head.lock"

// keeper is raystep's end of one running keeper.
type keeper struct {
	cmd        *exec.Cmd
	pid        int
	control    *os.File      // write end of the keeper's fd 3: "stop", or close
	started    chan struct{} // closed once ray runs, or the keeper ended
	detached   chan struct{} // closed once a detached keeper holds its expiry
	done       chan struct{} // closed once the keeper exited and said all it had to
	recordPath string        // a detached head's record; empty for a step's head
	asked      bool          // detach was asked for: stop signals the keeper

	// Set by read before started or done close.
	running   bool // the keeper said "started"
	rayPid    int
	rayExit   string // ray's exit code when it ended by itself
	problems  []string
	confirmed bool // the keeper said "done"
	waitErr   error
}

// keeperSpec is what startKeeper needs.
type keeperSpec struct {
	rayBin         string
	args, env      []string
	stdout, stderr io.Writer
	grace          time.Duration
	removeDir      string   // the temp dir the keeper removes; empty for none
	lock           *os.File // the flocked lock file in removeDir, or nil
	record         string   // a detached head's record (DetachOptions.Record); empty for none
}

// startKeeper starts the keeper, which starts `ray ARGS` as its child, and
// returns once ray runs or the keeper ended.
func startKeeper(s keeperSpec) (*keeper, error) {
	python, err := keeperPython(s.rayBin)
	if err != nil {
		return nil, err
	}
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create keeper control pipe: %w", err)
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		_, _ = ctrlR.Close(), ctrlW.Close()
		return nil, fmt.Errorf("create keeper status pipe: %w", err)
	}
	grace := strconv.FormatFloat(s.grace.Seconds(), 'f', 3, 64)
	argv := append([]string{"-I", "-S", "-", grace, s.removeDir, s.record, "--", s.rayBin}, s.args...)
	k := &keeper{cmd: exec.Command(python, argv...), control: ctrlW, recordPath: s.record,
		started: make(chan struct{}), detached: make(chan struct{}), done: make(chan struct{})}
	k.cmd.Env = s.env
	k.cmd.Stdin = strings.NewReader(keeperScript)
	k.cmd.Stdout, k.cmd.Stderr = s.stdout, s.stderr
	k.cmd.ExtraFiles = []*os.File{ctrlR, statW, s.lock}
	// Its own process group: a Ctrl-C or a kill of raystep's group leaves
	// the keeper to clean up after raystep. A detached keeper gets a
	// session of its own: no terminal's hangup reaches it.
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: s.record == "", Setsid: s.record != ""}
	// Should the keeper itself be killed, orphans that hold its output
	// must not hold up Wait.
	k.cmd.WaitDelay = 5 * time.Second
	err = k.cmd.Start()
	_, _ = ctrlR.Close(), statW.Close()
	if err != nil {
		_, _ = ctrlW.Close(), statR.Close()
		return nil, fmt.Errorf("start ray head keeper %s: %w", python, err)
	}
	k.pid = k.cmd.Process.Pid
	go k.read(statR)
	<-k.started
	return k, nil
}

// read records the keeper's status lines until it exits.
func (k *keeper) read(r io.ReadCloser) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k.record(sc.Text())
	}
	_ = r.Close()
	k.waitErr = k.cmd.Wait()
	if !k.running {
		close(k.started)
	}
	close(k.done)
}

// record takes in one status line.
func (k *keeper) record(line string) {
	verb, rest, _ := strings.Cut(line, " ")
	switch verb {
	case "started":
		if !k.running {
			k.running = true
			k.rayPid, _ = strconv.Atoi(rest)
			close(k.started)
		}
	case "detached":
		select {
		case <-k.detached:
		default:
			close(k.detached)
		}
	case "exited":
		k.rayExit = rest
	case "left":
		pid, cmd, _ := strings.Cut(rest, " ")
		k.problems = append(k.problems, fmt.Sprintf("process %s (%s) survived SIGKILL", pid, cmd))
	case "error":
		k.problems = append(k.problems, rest)
	case "done":
		k.confirmed = true
	}
}

// exitText says how ray ended, once done is closed.
func (k *keeper) exitText() string {
	switch {
	case k.rayExit != "":
		return "exit code " + k.rayExit
	case len(k.problems) > 0:
		return strings.Join(k.problems, "; ")
	}
	return fmt.Sprintf("keeper: %v", k.waitErr)
}

// stop asks the keeper to tear the head down; done closes once it has.
// A keeper asked to detach may no longer read its control pipe, so it
// gets SIGTERM as well.
func (k *keeper) stop() {
	// A keeper that already ended has nothing to stop: errors are moot.
	_, _ = io.WriteString(k.control, "stop\n")
	_ = k.control.Close()
	if k.asked {
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// result is what the keeper could not do, once done is closed; nil when
// it confirmed that every process of the head is gone and its temp dir
// removed.
func (k *keeper) result() error {
	errs := make([]error, 0, len(k.problems)+1)
	for _, p := range k.problems {
		errs = append(errs, errors.New(p))
	}
	if !k.confirmed {
		errs = append(errs, fmt.Errorf("ray head keeper (pid %d) ended (%v) without confirming "+
			"that every process of the head is gone", k.pid, k.waitErr))
	}
	return errors.Join(errs...)
}

// keeperPython returns a Python to run the keeper with: the one ray runs
// on, else a python3 beside ray, else python3 on PATH. The keeper needs
// only the standard library.
func keeperPython(rayBin string) (string, error) {
	cands := []string{Interpreter(rayBin), filepath.Join(filepath.Dir(rayBin), "python3")}
	if real, err := filepath.EvalSymlinks(rayBin); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(real), "python3"))
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() && strings.HasPrefix(filepath.Base(c), "python") {
			return c, nil
		}
	}
	if p, err := exec.LookPath("python3"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no python beside %s or on PATH to run the ray head keeper", rayBin)
}

// lockTempDir creates dir's lock file already flocked: it is locked under
// a temporary name and renamed, so a sweep never sees it unlocked.
func lockTempDir(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, lockName+".*")
	if err != nil {
		return nil, fmt.Errorf("create lock in %s: %w", dir, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, lockName))
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// sweepStale removes the temp dirs of private heads under root whose
// keeper is gone (it was killed too), and kills what still runs from them:
// the calling user's dirs only.
func sweepStale(root string, log *zap.Logger) {
	if log == nil {
		log = zap.NewNop()
	}
	locks, _ := filepath.Glob(filepath.Join(root, "rs*", lockName))
	for _, lock := range locks {
		if ownDir(filepath.Dir(lock)) != nil {
			continue // another user's (or a link): not ours to judge
		}
		f, err := os.Open(lock)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			dir := filepath.Dir(lock)
			killStragglers(dir)
			if err := os.RemoveAll(dir); err != nil {
				log.Warn("could not remove a stale ray head temp dir", zap.String("dir", dir), zap.Error(err))
			} else {
				log.Info("removed the temp dir of a ray head whose keeper was killed", zap.String("dir", dir))
			}
		}
		_ = f.Close()
	}
}
