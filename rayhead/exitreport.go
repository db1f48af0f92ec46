package rayhead

import (
	"fmt"
	"strings"
)

// ExitReport says, once Done is closed, why a head ended by itself: which
// of Ray's processes died, how, and the last lines of its log. `ray start
// --block` prints up to 200 lines of each dead process's log, mostly the
// raylet's periodic state dumps, which bury the one line that matters
// (Output keeps the end of all that); the report is a few lines a person
// reads in a step's failure.
func (h *Head) ExitReport() string { return exitReport(h.Output(), h.keeper.exitText()) }

// reportLines is how many of a dead process's last log lines ExitReport
// shows.
const reportLines = 8

// Ray's markers around the log tail of a process that died (ray/scripts).
const (
	tailBegin = "----- BEGIN "
	tailEnd   = "----- END "
	tailCodes = " tail (exit code(s)="
)

// exitReport builds ExitReport from the output of `ray start` and how it
// ended (keeper.exitText).
func exitReport(out, exit string) string {
	var (
		b       strings.Builder
		pending []string // lines since the last marker (or the start of the kept output)
	)
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, tailBegin) && strings.Contains(line, tailCodes):
			pending = nil
		case strings.Contains(line, tailEnd) && strings.Contains(line, tailCodes):
			file, codes := tailMarker(line)
			proc, _, _ := strings.Cut(file, ".")
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%s exited with exit code %s.%s The end of %s:", proc, codes, signalHint(codes), file)
			writeLast(&b, pending)
			pending = nil
		default:
			pending = append(pending, line)
		}
	}
	if b.Len() > 0 {
		return b.String()
	}
	// No process's log: ray start itself ended (killed, or it stopped the
	// head for a reason it printed).
	fmt.Fprintf(&b, "ray start ended with %s.%s The end of its output:", exit, signalHint(exit))
	writeLast(&b, pending)
	return b.String()
}

// tailMarker returns the file and the exit codes an END marker names:
// "... ----- END raylet.out tail (exit code(s)=-9 (signal 9)) -----".
func tailMarker(line string) (file, codes string) {
	_, rest, _ := strings.Cut(line, tailEnd)
	file, codes, _ = strings.Cut(rest, tailCodes)
	codes = strings.TrimSuffix(strings.TrimSpace(codes), "-----")
	return file, strings.TrimSuffix(strings.TrimSpace(codes), ")")
}

// signalHint names the usual sender of a SIGKILL (-9 is how Python's
// subprocess says killed by signal 9).
func signalHint(codes string) string {
	if strings.Contains(codes, "signal 9") || strings.HasSuffix(codes, "code -9") {
		return " Signal 9 is SIGKILL, which the kernel's out-of-memory killer sends too."
	}
	return ""
}

// writeLast writes the last reportLines lines of lines that say something,
// indented: not blank, not one of the raylet's state dumps.
func writeLast(b *strings.Builder, lines []string) {
	kept := telling(lines)
	if len(kept) == 0 {
		b.WriteString(" (none)")
		return
	}
	for _, l := range kept[max(0, len(kept)-reportLines):] {
		b.WriteString("\n    ")
		b.WriteString(l)
	}
}

// saysSomething reports whether a line of Ray's output says something to a
// person: it is not blank and not one of the raylet's periodic state dumps.
func saysSomething(line string) bool {
	return strings.TrimSpace(line) != "" && !strings.Contains(line, "[state-dump]")
}
