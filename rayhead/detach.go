package rayhead

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A detached head outlives the process that started it. Its keeper is the
// same keeper.py as a step's head's, in a session of its own with its
// output in a log file, so that nothing ties it to raystep: no pipe whose
// end would kill it, no terminal whose hangup would reach it, no Go
// process that must stay alive. Until Head.Detach it is an ordinary head
// (the starter's death or Stop still tears it down); from then on the
// keeper ends the head at the expiry written in a record file, which it
// reads again at that expiry, on SIGHUP and at least every minute, so that
// a later raystep command moves the expiry by rewriting the record.
// Another process finds the keeper again through Detached.

// DetachOptions makes Start start a detached head.
type DetachOptions struct {
	// Record is a JSON file with an "expires" field (an RFC 3339 time, as
	// encoding/json writes a time.Time): the head's expiry. It must hold
	// one by the time Head.Detach is called; rewrite it (atomically, by
	// rename) to move the expiry.
	Record string
	// Log is the file that receives, appended, the output of `ray start`
	// and the keeper's notes (when it expired, what it stopped).
	Log string
}

// outputs returns where the keeper and `ray start` write and sets h.out:
// opts.Stdout and opts.Stderr, kept in a tail buffer; for a detached head
// the log file, whose new part is h.out. closeLog closes this process's
// copy of the log.
func (h *Head) outputs(opts Options) (stdout, stderr io.Writer, closeLog func(), err error) {
	if opts.Detach == nil {
		tail := newTailBuffer(16 << 10)
		h.out = tail
		return writers(tail, opts.Stdout), writers(tail, opts.Stderr), func() {}, nil
	}
	f, err := os.OpenFile(opts.Detach.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open ray head log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, nil, fmt.Errorf("open ray head log: %w", err)
	}
	h.out = fileTail{path: opts.Detach.Log, from: fi.Size(), max: 16 << 10}
	return f, f, func() { _ = f.Close() }, nil
}

// fileTail is the last max bytes of a file, after offset from.
type fileTail struct {
	path string
	from int64
	max  int64
}

func (t fileTail) String() string {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", t.path, err)
	}
	defer f.Close()
	from := t.from
	if fi, err := f.Stat(); err == nil && fi.Size()-t.max > from {
		from = fi.Size() - t.max
	}
	b, err := io.ReadAll(io.NewSectionReader(f, from, t.max))
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", t.path, err)
	}
	return string(b)
}

// Detach hands a head started with Options.Detach over to its keeper:
// from then on the head no longer ends with this process but at the
// expiry in DetachOptions.Record, when its keeper gets SIGTERM
// (Detached.Stop), when ray exits, or on Stop. Detach returns once the
// keeper read the expiry; it fails if the head has no record or the
// keeper could not read an expiry from it (the keeper then stops the
// head). Do not call it at the same time as Stop.
func (h *Head) Detach(ctx context.Context) error {
	if h.keeper.recordPath == "" {
		return errors.New("detach ray head: it was not started with Options.Detach")
	}
	h.keeper.asked = true
	if _, err := io.WriteString(h.keeper.control, "detach\n"); err != nil {
		return fmt.Errorf("detach ray head: tell its keeper (pid %d): %w", h.keeper.pid, err)
	}
	select {
	case <-h.keeper.detached:
		_ = h.keeper.control.Close()
		return nil
	case <-h.keeper.done:
		return fmt.Errorf("detach ray head: its keeper (pid %d) ended instead: %w", h.keeper.pid,
			errors.Join(h.keeper.result(), errors.New(h.keeper.exitText())))
	case <-ctx.Done():
		return fmt.Errorf("detach ray head: its keeper (pid %d) did not answer: %w", h.keeper.pid, context.Cause(ctx))
	}
}

// KeeperPid returns the process id of the head's keeper: for a detached
// head, the pid that Detached needs.
func (h *Head) KeeperPid() int { return h.keeper.pid }

// TokenFile returns the 0600 file that holds the head's token (in its temp
// dir, removed with it); empty without Options.TokenAuth.
func (h *Head) TokenFile() string {
	if h.token == "" {
		return ""
	}
	return filepath.Join(h.tempDir, tokenFile)
}

// ErrKeeperGone is returned by Detached.Reload when the keeper no longer runs.
var ErrKeeperGone = errors.New("the ray head's keeper no longer runs")

// Detached is the keeper of a detached head as another process knows it:
// by its pid and the head's temp dir (Head.KeeperPid, Head.TempDir), which
// identify it together, so a reused pid is never taken for it.
type Detached struct {
	// Pid is the keeper's process id.
	Pid int
	// TempDir is the head's temp dir, an argument of the keeper.
	TempDir string
	// Poll is how often Stop checks whether the keeper is gone; 0 means 50ms.
	Poll time.Duration
}

// Running reports whether the keeper still runs (a zombie does not).
func (d Detached) Running() bool {
	if d.Pid <= 0 || d.TempDir == "" {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(d.Pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte("\x00"+d.TempDir+"\x00")) {
		return false
	}
	return !zombie(d.Pid)
}

// zombie reports whether pid has exited and only its parent's wait is missing.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// signal sends sig to the keeper through a pidfd, opened before the check
// that the pid is still the keeper's, so a pid reused meanwhile is never
// signalled.
func (d Detached) signal(sig syscall.Signal) error {
	h, err := d.open()
	if err != nil {
		return err
	}
	defer h.close()
	return d.send(h, sig)
}

// open opens a handle of the keeper, after which its pid can no longer
// name another process, and checks that the pid is still the keeper's. It
// returns ErrKeeperGone when it is not.
func (d Detached) open() (procHandle, error) {
	h, err := openProc(d.Pid)
	if errors.Is(err, errProcGone) {
		return h, ErrKeeperGone
	}
	if err != nil {
		return h, fmt.Errorf("open keeper pid %d: %w", d.Pid, err)
	}
	if !d.Running() {
		h.close()
		return h, ErrKeeperGone
	}
	return h, nil
}

// send sends sig to the keeper through its handle h.
func (d Detached) send(h procHandle, sig syscall.Signal) error {
	if err := h.signal(sig); err != nil {
		return fmt.Errorf("signal keeper pid %d: %w", d.Pid, err)
	}
	return nil
}

// Reload has the keeper read its record again now (SIGHUP), so that an
// earlier expiry counts at once; a later one it finds by itself.
func (d Detached) Reload() error {
	if err := d.signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload ray head keeper (pid %d): %w", d.Pid, err)
	}
	return nil
}

// Stop has the keeper stop the head (SIGTERM: every process of it, then
// its temp dir) and waits until the keeper is gone. Whatever the keeper
// left, or left behind when it was killed itself, Stop kills (processes
// that mention the temp dir) and removes. It returns nil once no process
// mentions the temp dir and the dir is gone; if ctx ends first, the keeper
// carries on alone.
func (d Detached) Stop(ctx context.Context) error {
	h, err := d.open()
	switch {
	case errors.Is(err, ErrKeeperGone):
	case err != nil:
		return fmt.Errorf("stop ray head %s: %w", d.TempDir, err)
	default:
		defer h.close()
		if err := d.send(h, syscall.SIGTERM); err != nil {
			return fmt.Errorf("stop ray head %s: %w", d.TempDir, err)
		}
		// The handle says when the keeper has exited. Its command line,
		// which Running reads, empties earlier, while it is still exiting.
		if err := awaitExit(ctx, []procHandle{h}, d.Poll); err != nil {
			return fmt.Errorf("stop ray head %s: its keeper (pid %d) is still stopping it: %w",
				d.TempDir, d.Pid, err)
		}
	}
	return Reclaim(ctx, d.TempDir)
}

// Reclaim removes what is left of a head whose keeper is gone: it kills
// every process of it that it can find (those that mention dir, the head's
// temp dir, and those in the process group of its `ray start`), waits
// until they are gone, and removes dir. A dir that is already gone is
// fine. A process of the head that left its process group and never
// mentions its temp dir is found only by a live keeper. If ctx ends
// first, Reclaim names the survivors.
func Reclaim(ctx context.Context, dir string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("reclaim ray head: temp dir %q is not an absolute path", dir)
	}
	f := newHeadFinder(dir)
	defer f.close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		left := f.kill()
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			var names []string
			for pid, cmd := range left {
				names = append(names, fmt.Sprintf("%d (%s)", pid, cmd))
			}
			return fmt.Errorf("processes of the ray head in %s survived SIGKILL: %s: %w",
				dir, strings.Join(names, ", "), context.Cause(ctx))
		case <-tick.C:
		}
	}
	if err := awaitExit(ctx, f.handles(), 0); err != nil {
		return fmt.Errorf("processes of the ray head in %s are still exiting after SIGKILL: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove ray head temp dir: %w", err)
	}
	return nil
}
