package rayhead

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/test/fakeray"
)

// proc is a process as the tests know it: its pid and when it started,
// so that a pid the kernel has given to another process meanwhile (pid_max
// is 32768 on some machines, and Ray makes many) is not taken for it, nor
// killed at cleanup.
type proc struct {
	pid   int
	start string
}

// procOf identifies the process pid now.
func procOf(pid int) proc { return proc{pid: pid, start: procStat(pid)[19]} }

// procStat returns the fields of /proc/PID/stat after the command name
// (state first, start time at index 19), padded to 20 when unreadable.
func procStat(pid int) []string {
	fields := make([]string, 20)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return fields
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		copy(fields, strings.Fields(string(b[i+1:])))
	}
	return fields
}

// running reports whether p has not exited (a zombie has: only its
// parent's wait is missing).
func (p proc) running() bool {
	f := procStat(p.pid)
	return f[0] != "" && f[0] != "Z" && f[19] == p.start
}

// kill SIGKILLs p if it still runs.
func (p proc) kill() {
	if p.running() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// procsOf identifies the processes pids now.
func procsOf(pids ...int) []proc {
	out := make([]proc, len(pids))
	for i, pid := range pids {
		out[i] = procOf(pid)
	}
	return out
}

// readPids reads the processes the fake head recorded (fakeray).
func readPids(t *testing.T, dir string) []proc {
	t.Helper()
	var pids []int
	for _, name := range []string{"session.pid", "orphan.pid"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pids = append(pids, pid)
	}
	return procsOf(pids...)
}

// TestKeeperKillsEveryProcessOfTheHead ends a head in each way raystep's
// head can end and checks that the keeper killed every process started for
// it, those outside its process group included, and removed its temp dir.
func TestKeeperKillsEveryProcessOfTheHead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(t *testing.T, h *Head) error
	}{
		{"Stop", func(t *testing.T, h *Head) error { return h.Stop(context.Background()) }},
		{"raystep gone (control pipe closed, as by SIGKILL)", func(t *testing.T, h *Head) error {
			_ = h.keeper.control.Close()
			<-h.Done()
			return h.keeper.result()
		}},
		{"keeper SIGTERMed", func(t *testing.T, h *Head) error {
			_ = syscall.Kill(h.keeper.pid, syscall.SIGTERM)
			<-h.Done()
			return h.keeper.result()
		}},
		{"ray exited by itself", func(t *testing.T, h *Head) error {
			_ = syscall.Kill(h.Pid(), syscall.SIGKILL)
			<-h.Done()
			if got := h.keeper.exitText(); got != "exit code -9" {
				t.Errorf("exitText() = %q, want ray's own exit", got)
			}
			return h.Stop(context.Background())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rayBin, dir := fakeray.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h, err := Start(ctx, Options{RayBin: rayBin, StopTimeout: time.Second})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			pids := append(readPids(t, dir), procsOf(h.Pid(), h.keeper.pid)...)
			t.Cleanup(func() {
				for _, p := range pids {
					p.kill()
				}
			})
			if err := tt.end(t, h); err != nil {
				t.Errorf("the keeper reported: %v", err)
			}
			for _, p := range pids {
				if p.running() {
					t.Errorf("process %d of the head still runs", p.pid)
				}
			}
			if _, err := os.Stat(h.TempDir()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temp dir %s left behind (stat: %v)", h.TempDir(), err)
			}
		})
	}
}

// TestStopReportsAKilledKeeper kills the keeper itself: Stop cannot know
// what is left and says so, and the next head start removes the temp dir
// the keeper no longer holds, but not one whose keeper lives.
func TestStopReportsAKilledKeeper(t *testing.T) {
	rayBin, dir := fakeray.New(t)
	// A root of its own: a head started meanwhile by another test process
	// would sweep the dead keeper's dir under /tmp before this test does.
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := Start(ctx, Options{RayBin: rayBin, StopTimeout: time.Second, tempRoot: root})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pids := append(readPids(t, dir), procOf(h.Pid()))
	t.Cleanup(func() {
		for _, p := range pids {
			p.kill()
		}
		_ = os.RemoveAll(h.TempDir())
	})
	live, err := Start(ctx, Options{RayBin: rayBin, StopTimeout: time.Second, tempRoot: root})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = live.Stop(context.Background()) })

	_ = syscall.Kill(h.keeper.pid, syscall.SIGKILL)
	err = h.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "without confirming that every process of the head is gone") {
		t.Errorf("Stop after the keeper was killed = %v, want it to say nothing was confirmed", err)
	}
	if _, err := os.Stat(h.TempDir()); err != nil {
		t.Fatalf("the dead keeper's temp dir is already gone: %v", err)
	}
	sweepStale(root, nil)
	if _, err := os.Stat(h.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sweep left the stale temp dir %s (stat: %v)", h.TempDir(), err)
	}
	if _, err := os.Stat(live.TempDir()); err != nil {
		t.Errorf("sweep removed the temp dir of a live head: %v", err)
	}
}

// TestKeeperResult turns the keeper's report into Stop's error.
func TestKeeperResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		lines     string
		wantParts []string
	}{
		{"all gone", "started 10\ndone\n", nil},
		{"survivor", "started 10\nleft 42 python -c train\ndone\n", []string{"process 42 (python -c train) survived SIGKILL"}},
		{"temp dir kept", "started 10\nerror remove /tmp/rs1: Device or resource busy\ndone\n",
			[]string{"remove /tmp/rs1: Device or resource busy"}},
		{"no confirmation", "started 10\n", []string{"without confirming"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := &keeper{pid: 7, started: make(chan struct{})}
			for _, line := range strings.Split(strings.TrimSuffix(tt.lines, "\n"), "\n") {
				k.record(line)
			}
			err := k.result()
			if len(tt.wantParts) == 0 && err != nil {
				t.Errorf("result() = %v, want nil", err)
			}
			for _, part := range tt.wantParts {
				if err == nil || !strings.Contains(err.Error(), part) {
					t.Errorf("result() = %v, want it to contain %q", err, part)
				}
			}
		})
	}
}

// TestStartHeadReportsARayThatCannotRun gives Start a ray that cannot
// be executed: the keeper's own message comes back.
func TestStartHeadReportsARayThatCannotRun(t *testing.T) {
	t.Parallel()
	rayBin := filepath.Join(t.TempDir(), "ray")
	if err := os.WriteFile(rayBin, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Only catches a hang: the start waits its turn for the machine-wide
	// start slot behind the suite's real head starts.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{RayBin: rayBin})
	if err == nil || !strings.Contains(err.Error(), "start "+rayBin+": [Errno 13] Permission denied") {
		t.Fatalf("Start error = %v, want the keeper's message", err)
	}
}
