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
// startup": with the two attempts after it, a raylet that cannot run (a
// broken install, a library it cannot load) cost 108 s before Start gave
// up, without the raylet's own words. The raylet is a child of `ray
// start` that stays a zombie until then, so its end shows in /proc at
// once. Where there is no /proc the watch sees nothing.
type rayletWatch struct {
	parent int    // `ray start`
	logs   string // the session's log dir
	pid    int    // the raylet once seen; 0 before
}

// rayletName is the raylet's command name (/proc/PID/comm).
const rayletName = "raylet"

// exited returns an error once the raylet exited, nil while it runs or
// before it started. agentLost names an agent's log that says the agent
// could not bind its port (Head.agentLostItsPort), or "".
func (w *rayletWatch) exited(agentLost func() string) error {
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
	// Always worth another attempt, as `ray start`'s "timed out during
	// startup" was: on a busy machine a raylet also exits when an agent it
	// fate-shares with lost its port, or when the GCS answered too late.
	// An install that cannot run fails all three, each in seconds.
	if lost := agentLost(); lost != "" {
		return fmt.Errorf("%w: %s A Ray agent could not bind its port (%s)", errRetryable, what, lost)
	}
	file, said := w.said()
	if len(said) == 0 {
		return fmt.Errorf("%w: %s Its logs name no error", errRetryable, what)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s What %s says:", what, file)
	writeLast(&b, said)
	return fmt.Errorf("%w: %s", errRetryable, b.String())
}

// said returns the raylet's log file that says why it ended, and the
// lines of it that do (at most reportLines): its stderr, else its log,
// from the first error on (a failed check and the stack after it), else
// the end of its stderr; no lines when it said nothing of the kind.
func (w *rayletWatch) said() (file string, lines []string) {
	var tail []string
	for _, name := range []string{"raylet.err", "raylet.out"} {
		data, err := os.ReadFile(filepath.Join(w.logs, name))
		if err != nil {
			continue
		}
		all := strings.Split(string(data), "\n")
		for i, l := range all {
			if lvl := rayLogLevel(l); lvl == "E" || lvl == "C" {
				lines = telling(all[i:])
				return name, lines[:min(len(lines), reportLines)]
			}
		}
		if name == "raylet.err" {
			tail = telling(all)
		}
	}
	if len(tail) > 0 {
		return "raylet.err", tail[max(0, len(tail)-reportLines):]
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
