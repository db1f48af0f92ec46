// Command bench measures raystep's own overhead per step against Ray's job
// CLI: the same trivial entrypoint, submitted to the same running head,
// once by `raystep run` (RAY_ADDRESS mode, standalone) and once by
// `ray job submit` (which also waits for the job and prints its log), in
// alternation. It prints wall time, the child's CPU time (user+sys, from
// rusage) and its peak RSS side by side, and the ratio of wall times.
//
//	make build && go run ./test/bench -n 5
//
// Without -address it starts a private head (rayhead.Start) and stops it
// at the end.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/rayhead"
)

// sample is one measured run of a child process.
type sample struct {
	wall, cpu time.Duration
	maxRSS    int64 // bytes
}

func main() {
	n := flag.Int("n", 5, "runs per tool")
	raystep := flag.String("raystep", "bin/raystep", "raystep binary")
	spec := flag.String("spec", "test/bench/trivial.yaml", "the step's spec")
	address := flag.String("address", "", "dashboard URL of a running head; empty starts one")
	rayBin := flag.String("ray", "", "ray executable (default: .venv/bin/ray, else PATH)")
	flag.Parse()
	if err := bench(*n, *raystep, *spec, *address, *rayBin); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func bench(n int, raystep, spec, address, rayBin string) error {
	ray, err := rayhead.FindRay(rayBin)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if address == "" {
		h, err := rayhead.Start(ctx, rayhead.Options{RayBin: ray})
		if err != nil {
			return err
		}
		defer func() { _ = h.Stop(context.WithoutCancel(ctx)) }()
		address = h.DashboardURL()
	}
	dir, err := os.MkdirTemp("", "raystep-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	entrypoint := []string{"python", "-c", "print('ok')"}
	tools := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"raystep run", func() *exec.Cmd {
			c := exec.Command(raystep, "run", "-f", spec)
			c.Env = append(os.Environ(), "RAY_ADDRESS="+address)
			return c
		}},
		{"raystep (pipes)", func() *exec.Cmd {
			c := exec.Command(raystep, "run", "-f", spec)
			c.Env = append(os.Environ(), "RAY_ADDRESS="+address)
			return withPipes(c, dir)
		}},
		{"ray job submit", func() *exec.Cmd {
			args := append([]string{"job", "submit", "--address", address, "--submission-id", newID(),
				"--entrypoint-num-cpus", "0.1", "--"}, entrypoint...)
			c := exec.Command(ray, args...)
			c.Env = os.Environ()
			return c
		}},
	}
	results := make([][]sample, len(tools))
	// One warm-up run each, then alternate so drift hits both alike.
	for i := -1; i < n; i++ {
		for t, tool := range tools {
			s, err := measure(tool.cmd())
			if err != nil {
				return fmt.Errorf("%s: %w", tool.name, err)
			}
			if i >= 0 {
				results[t] = append(results[t], s)
			}
		}
	}
	fmt.Printf("head %s, %d runs each (after one warm-up), entrypoint %q\n\n", address, n, entrypoint)
	fmt.Printf("%-16s %12s %12s %12s %12s %12s\n", "tool", "wall median", "wall min", "CPU median", "CPU max", "peak RSS")
	for t, tool := range tools {
		w, c := durations(results[t], func(s sample) time.Duration { return s.wall }), durations(results[t], func(s sample) time.Duration { return s.cpu })
		var rss int64
		for _, s := range results[t] {
			rss = max(rss, s.maxRSS)
		}
		fmt.Printf("%-16s %12s %12s %12s %12s %9.1f MiB\n", tool.name, ms(median(w)), ms(w[0]), ms(median(c)), ms(c[len(c)-1]), float64(rss)/(1<<20))
	}
	wall := func(i int) float64 {
		return float64(median(durations(results[i], func(s sample) time.Duration { return s.wall })))
	}
	fmt.Printf("\nwall ratio raystep / ray job submit: %.2f standalone, %.2f under pipes\n", wall(0)/wall(2), wall(1)/wall(2))
	return nil
}

// withPipes bootstraps cmd as Dagster's subprocess client would, with a
// fresh run id (a repeated one would attach to the previous job) and the
// messages appended to a temp file.
func withPipes(cmd *exec.Cmd, dir string) *exec.Cmd {
	id := newID()
	data := pipes.ContextData{AssetKeys: []string{"bench"}, RunID: id, Extras: map[string]any{}}
	env, err := pipes.BootstrapEnv(pipes.ContextDataParams(data), pipes.FileMessagesParams(filepath.Join(dir, id)))
	if err != nil {
		panic(err) // only plain values are encoded
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// measure runs cmd to completion and reads its rusage.
func measure(cmd *exec.Cmd) (sample, error) {
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return sample{}, err
		}
		return sample{}, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return sample{wall: wall, cpu: cpu, maxRSS: ru.Maxrss << 10}, nil
}

// durations returns the field f of every sample, sorted.
func durations(ss []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	slices.Sort(out)
	return out
}

func median(d []time.Duration) time.Duration { return d[len(d)/2] }

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "bench-ray-" + hex.EncodeToString(b[:])
}
