// Command bench measures log-tail throughput and peak memory of raysubmit
// against `ray job logs --follow`, side by side on the same Ray job.
//
// It starts a Ray head (rayhead.Start) unless -dashboard is given,
// submits a job printing about -mb MiB of numbered lines, then follows it
// with both clients at once, each in its own process so that peak RSS
// (getrusage ru_maxrss) is the client's alone:
//
//	go run ./raysubmit/bench -mb 50              # a job that writes as fast as it can
//	go run ./raysubmit/bench -mb 50 -seconds 20  # followed live while it writes
//
// It prints one line per client (bytes, seconds, MiB/s, peak RSS) and the
// ratios. Run it from the repository root so .venv/bin/ray is found.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "follow" {
		os.Exit(follow(os.Args[2], os.Args[3]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// follow is the raysubmit side, run as a child process.
func follow(url, id string) int {
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, err := c.Follow(context.Background(), id, io.Discard, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "bytes", n)
	return 0
}

type result struct {
	name    string
	bytes   int64
	elapsed time.Duration
	maxRSS  int64 // KiB
	cpu     time.Duration
	err     error
}

func run(ctx context.Context) error {
	mb := flag.Int("mb", 50, "MiB of log lines the job prints")
	width := flag.Int("width", 100, "bytes per log line")
	dashboard := flag.String("dashboard", "", "existing dashboard URL (default: start a head)")
	seconds := flag.Float64("seconds", 0, "spread the job's output over this many seconds (0: as fast as it can)")
	sequential := flag.Bool("sequential", false, "run the clients one after the other, not at once")
	flag.Parse()
	rayBin, err := rayhead.FindRay("")
	if err != nil {
		return err
	}
	url := *dashboard
	if url == "" {
		h, err := rayhead.Start(ctx, rayhead.Options{RayBin: rayBin, NumCPUs: 2})
		if err != nil {
			return err
		}
		defer h.Stop(context.WithoutCancel(ctx))
		url = h.DashboardURL()
	}
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url})
	if err != nil {
		return err
	}
	uri, err := c.UploadWorkingDir(ctx, filepath.Join("raysubmit", "testdata", "jobs"), raysubmit.PackageOptions{})
	if err != nil {
		return err
	}
	lines := (*mb << 20) / *width
	sub, err := c.Submit(ctx, raysubmit.SubmitRequest{
		Entrypoint: fmt.Sprintf("python lines.py %d %d %g", lines, *width, *seconds),
		RuntimeEnv: map[string]any{"working_dir": uri},
	})
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmds := []struct {
		name string
		cmd  *exec.Cmd
	}{
		{"raysubmit Follow", exec.CommandContext(ctx, self, "follow", url, sub.SubmissionID)},
		{"ray job logs --follow", exec.CommandContext(ctx, rayBin, "job", "logs", "--follow", "--address", url, sub.SubmissionID)},
	}
	results := make([]result, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Go(func() { results[i] = measure(c.name, c.cmd) })
		if *sequential {
			wg.Wait()
		}
	}
	wg.Wait()
	mode := "at once"
	if *sequential {
		mode = "one after the other"
	}
	fmt.Printf("job %s: %d lines of %d bytes (%d MiB) over %gs, clients %s\n",
		sub.SubmissionID, lines, *width, *mb, *seconds, mode)
	for _, r := range results {
		if r.err != nil {
			return fmt.Errorf("%s: %w", r.name, r.err)
		}
		fmt.Printf("%-24s %10d bytes %7.2fs %7.2f MiB/s  peak RSS %6.1f MiB  CPU %6.2fs\n", r.name, r.bytes,
			r.elapsed.Seconds(), float64(r.bytes)/(1<<20)/r.elapsed.Seconds(), float64(r.maxRSS)/1024, r.cpu.Seconds())
	}
	rs, py := results[0], results[1]
	fmt.Printf("ratio raysubmit/ray-cli: throughput %.2fx, peak RSS %.2fx, CPU %.2fx\n",
		(float64(rs.bytes)/rs.elapsed.Seconds())/(float64(py.bytes)/py.elapsed.Seconds()),
		float64(rs.maxRSS)/float64(py.maxRSS), rs.cpu.Seconds()/py.cpu.Seconds())
	return nil
}

// measure runs cmd, counting the bytes it writes to stdout (raysubmit's
// child reports its count on stderr instead, since it discards the log).
func measure(name string, cmd *exec.Cmd) result {
	r := result{name: name}
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.err = err
		return r
	}
	var stderr lastBytes
	cmd.Stderr = &stderr
	start := time.Now()
	if r.err = cmd.Start(); r.err != nil {
		return r
	}
	n, _ := io.Copy(io.Discard, out)
	r.err = cmd.Wait()
	r.elapsed = time.Since(start)
	r.bytes = n
	if _, err := fmt.Sscanf(stderr.String(), "bytes %d", &r.bytes); err != nil && n == 0 {
		r.bytes = n
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if r.err != nil {
		r.err = fmt.Errorf("%w: %s", r.err, stderr.String())
	}
	return r
}

// lastBytes keeps the last 4 KiB written to it.
type lastBytes struct {
	mu  sync.Mutex
	buf []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if len(l.buf) > 4096 {
		l.buf = l.buf[len(l.buf)-4096:]
	}
	return len(p), nil
}

func (l *lastBytes) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
