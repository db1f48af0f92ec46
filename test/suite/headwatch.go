package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// headWatch counts the Ray heads started on the machine during the run,
// however they were started: every head runs exactly one gcs_server for
// its whole life (ten seconds at the very least), so a look at /proc
// every half second sees each. It is the check on the counting ray's
// figure, which also says who started each head.
type headWatch struct {
	mu      sync.Mutex
	known   map[string]bool // "pid start-time" of gcs_servers already running or seen
	seen    int
	stopped chan struct{}
	done    chan struct{}
}

func newHeadWatch() *headWatch {
	w := &headWatch{known: map[string]bool{}, stopped: make(chan struct{}), done: make(chan struct{})}
	w.scan(false) // those running before the run are not the run's
	return w
}

// run looks every half second until ctx ends or stop is called.
func (w *headWatch) run(ctx context.Context) {
	defer close(w.done)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.stopped:
			return
		case <-tick.C:
			w.scan(true)
		}
	}
}

// stop ends the watch after one last look and returns how many heads it saw.
func (w *headWatch) stop() int {
	select {
	case <-w.stopped:
	default:
		close(w.stopped)
	}
	<-w.done
	w.scan(true)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

func (w *headWatch) scan(count bool) {
	entries, _ := os.ReadDir("/proc")
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Base(exe) != "gcs_server" {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Field 22, the start time, after the command name in parentheses.
		fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
		if len(fields) < 20 {
			continue
		}
		id := e.Name() + " " + string(fields[19])
		if !w.known[id] {
			w.known[id] = true
			if count {
				w.seen++
			}
		}
	}
}

// countHeads counts the heads in the events file.
func countHeads(events string) int {
	b, err := os.ReadFile(events)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\tray-head\t"))
}
