package rayhead

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// rayletWatch notices a raylet that exited before `ray start` said its
// node is up. `ray start` itself only notices once its wait for the node
// (a fixed 30 s) ran out, and then says the node "timed out during
// startup", which reads as a busy machine: the head was started again
// twice, and a raylet that cannot run (a broken install, a library it
// cannot load) cost some 100 s before Start gave up, without the raylet's
// own words. The raylet is a child of `ray start` that stays a zombie
// until then, so its end shows in /proc at once. Where there is no /proc
// the watch sees nothing.
type rayletWatch struct {
	parent int    // `ray start`
	logs   string // the session's log dir
	pid    int    // the raylet once seen; 0 before
}

// rayletName is the raylet's command name (/proc/PID/comm).
const rayletName = "raylet"

// exited returns an error once the raylet exited, nil while it runs or
// before it started.
func (w *rayletWatch) exited() error {
	if w.parent <= 0 {
		return nil
	}
	if w.pid == 0 {
		w.pid = childNamed(w.parent, rayletName)
		if w.pid == 0 {
			return nil
		}
	}
	st, err := readStat(w.pid)
	if err == nil && st.comm == rayletName && st.state != 'Z' && st.state != 'X' {
		return nil
	}
	how := "exited"
	if err == nil && st.comm == rayletName {
		how = st.how()
	}
	what := fmt.Sprintf("its raylet (pid %d) %s before the node was up", w.pid, how)
	said := w.said()
	switch {
	case said == "":
		// Killed, likely, with nothing to say (the OOM killer on a busy
		// machine, say): a new attempt may fare better, as it did when
		// `ray start` said the node timed out.
		return fmt.Errorf("%w: %s, without an error in its logs", errRetryable, what)
	case retryableStart(said):
		return fmt.Errorf("%w: %s; the raylet said:\n%s", errRetryable, what, said)
	}
	return fmt.Errorf("ray head failed to start: %s; the raylet said:\n%s", what, said)
}

// said returns what the raylet said about its end: the last lines of its
// stderr, else its log from its first error on (a failed check and the
// stack after it); "" when it said nothing of the kind.
func (w *rayletWatch) said() string {
	if data, err := os.ReadFile(filepath.Join(w.logs, "raylet.err")); err == nil {
		if tail := lastLines(data, 10); tail != "" {
			return tail
		}
	}
	data, err := os.ReadFile(filepath.Join(w.logs, "raylet.out"))
	if err != nil {
		return ""
	}
	if i := firstError(data); i >= 0 {
		return firstLines(data[i:], 10)
	}
	return ""
}

// firstError returns the offset of the first line of a Ray log at level
// error or critical ("[2026-12-07 12:00:00,000 E 4242 4242] ..."), or -1.
func firstError(data []byte) int {
	for off := 0; off < len(data); {
		line := data[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if f := bytes.Fields(line); len(f) > 2 && bytes.HasPrefix(f[0], []byte("[")) &&
			(bytes.Equal(f[2], []byte("E")) || bytes.Equal(f[2], []byte("C"))) {
			return off
		}
		off += len(line)
	}
	return -1
}

// firstLines returns the first n lines of data that are not blank.
func firstLines(data []byte, n int) string {
	var lines []string
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(lines) == n {
			break
		}
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, string(bytes.TrimRight(l, "\r")))
		}
	}
	return strings.Join(lines, "\n")
}

// lastLines returns the last n lines of data that are not blank.
func lastLines(data []byte, n int) string {
	var lines []string
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, string(bytes.TrimRight(l, "\r")))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// childNamed returns the pid of a child of pid whose command name is
// name, or 0. It reads every thread's children: `ray start` may spawn from
// any of them.
func childNamed(pid int, name string) int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			child, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if st, err := readStat(child); err == nil && st.comm == name {
				return child
			}
		}
	}
	return 0
}

// statInfo is what /proc/PID/stat says of a process.
type statInfo struct {
	comm  string
	state byte
	// exit is its wait status once it exited (Linux 3.5 on); -1 unknown.
	exit int
}

// how says how a process that exited ended: "exited with code 1",
// "was killed by signal 9", or "exited".
func (p statInfo) how() string {
	switch ws := syscall.WaitStatus(p.exit); {
	case p.exit < 0:
		return "exited"
	case ws.Signaled():
		return fmt.Sprintf("was killed by signal %d (%s)", ws.Signal(), ws.Signal())
	case ws.Exited():
		return fmt.Sprintf("exited with code %d", ws.ExitStatus())
	}
	return "exited"
}

// readStat reads /proc/PID/stat: "PID (COMM) STATE ...", where COMM may
// hold spaces and parentheses, and the exit status is the 52nd field.
func readStat(pid int) (statInfo, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return statInfo{}, err
	}
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return statInfo{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, data)
	}
	rest := strings.Fields(string(data[end+1:]))
	if len(rest) == 0 || len(rest[0]) != 1 {
		return statInfo{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, data)
	}
	st := statInfo{comm: string(data[open+1 : end]), state: rest[0][0], exit: -1}
	if len(rest) > 49 {
		if code, err := strconv.Atoi(rest[49]); err == nil {
			st.exit = code
		}
	}
	return st, nil
}
