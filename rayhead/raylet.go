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
	how, hint := "exited", ""
	if err == nil && st.comm == rayletName {
		how = st.how()
		hint = signalHint(how)
	}
	what := fmt.Sprintf("its raylet (pid %d) %s before the node was up.%s", w.pid, how, hint)
	file, said := w.said()
	if len(said) == 0 {
		// Killed, likely, with nothing to say (the OOM killer on a busy
		// machine, say): a new attempt may fare better, as it did when
		// `ray start` said the node timed out.
		return fmt.Errorf("%w: %s Its logs name no error", errRetryable, what)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s What %s says:", what, file)
	writeLast(&b, said)
	if retryableStart(strings.Join(said, "\n")) {
		return fmt.Errorf("%w: %s", errRetryable, b.String())
	}
	return fmt.Errorf("ray head failed to start: %s", b.String())
}

// said returns the raylet's log file that says why it ended, and the
// lines of it that do (at most reportLines): the end of its stderr, else
// its log from its first error on (a failed check and the stack after
// it); no lines when it said nothing of the kind.
func (w *rayletWatch) said() (file string, lines []string) {
	if data, err := os.ReadFile(filepath.Join(w.logs, "raylet.err")); err == nil {
		lines = telling(strings.Split(string(data), "\n"))
		if len(lines) > 0 {
			return "raylet.err", lines[max(0, len(lines)-reportLines):]
		}
	}
	data, err := os.ReadFile(filepath.Join(w.logs, "raylet.out"))
	if err != nil {
		return "", nil
	}
	all := strings.Split(string(data), "\n")
	for i, l := range all {
		if rayLogLevel(l) == "E" || rayLogLevel(l) == "C" {
			lines = telling(all[i:])
			return "raylet.out", lines[:min(len(lines), reportLines)]
		}
	}
	return "", nil
}

// telling returns the lines that say something (saysSomething).
func telling(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimRight(l, " \t\r"); saysSomething(l) {
			out = append(out, l)
		}
	}
	return out
}

// rayLogLevel returns the level letter of a line of a Ray process's log,
// "[2026-12-07 12:00:00,000 E 4242 4242] ...", or "".
func rayLogLevel(line string) string {
	if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[0], "[") && len(f[2]) == 1 {
		return f[2]
	}
	return ""
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
