package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Helpers of the signal tests: processes read from /proc, and a buffer
// that says when it grew.

// allPids lists the pids in /proc.
func allPids() []int {
	entries, _ := os.ReadDir("/proc")
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat returns the fields of /proc/PID/stat after the command name:
// state, ppid, pgrp, ...
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// running reports whether pid exists and has not exited (a zombie has).
func running(pid int) bool {
	f := procStat(pid)
	return len(f) > 0 && f[0] != "Z"
}

// groupMembers lists the running processes of process group pgid.
func groupMembers(pgid int) []int {
	var pids []int
	want := strconv.Itoa(pgid)
	for _, pid := range allPids() {
		if f := procStat(pid); len(f) > 2 && f[2] == want && f[0] != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// describe lists pids with their command lines.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		fmt.Fprintf(&b, "\n  %d %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
	}
	return b.String()
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func without(s []int, v int) []int {
	var out []int
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// watchBuffer collects a stream, calls onLine for each complete line and
// tells waiters when it grew.
type watchBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	line   []byte
	grew   chan struct{}
	onLine func(string)
}

func newWatchBuffer() *watchBuffer { return &watchBuffer{grew: make(chan struct{})} }

func (w *watchBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.b.Write(p)
	w.line = append(w.line, p...)
	var lines []string
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(w.line[:i]))
		w.line = w.line[i+1:]
	}
	close(w.grew)
	w.grew = make(chan struct{})
	onLine := w.onLine
	w.mu.Unlock()
	for _, l := range lines {
		if onLine != nil {
			onLine(l)
		}
	}
	return len(p), nil
}

func (w *watchBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// changed is closed at the next write.
func (w *watchBuffer) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.grew
}

var _ io.Writer = (*watchBuffer)(nil)
