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

// options are the command-line flags.
type options struct {
	mb, width  int
	dashboard  string
	seconds    float64
	sequential bool
}

func parseFlags() options {
	var o options
	flag.IntVar(&o.mb, "mb", 50, "MiB of log lines the job prints")
	flag.IntVar(&o.width, "width", 100, "bytes per log line")
	flag.StringVar(&o.dashboard, "dashboard", "", "existing dashboard URL (default: start a head)")
	flag.Float64Var(&o.seconds, "seconds", 0, "spread the job's output over this many seconds (0: as fast as it can)")
	flag.BoolVar(&o.sequential, "sequential", false, "run the clients one after the other, not at once")
	flag.Parse()
	return o
}

func run(ctx context.Context) error {
	o := parseFlags()
	rayBin, err := rayhead.FindRay("")
	if err != nil {
		return err
	}
	url := o.dashboard
	if url == "" {
		h, err := rayhead.Start(ctx, rayhead.Options{RayBin: rayBin, NumCPUs: 2})
		if err != nil {
			return err
		}
		defer h.Stop(context.WithoutCancel(ctx))
		url = h.DashboardURL()
	}
	lines := (o.mb << 20) / o.width
	id, err := submit(ctx, url, lines, o)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	results := measureAll(o.sequential, []client{
		{"raysubmit Follow", exec.CommandContext(ctx, self, "follow", url, id)},
		{"ray job logs --follow", exec.CommandContext(ctx, rayBin, "job", "logs", "--follow", "--address", url, id)},
	})
	mode := "at once"
	if o.sequential {
		mode = "one after the other"
	}
	fmt.Printf("job %s: %d lines of %d bytes (%d MiB) over %gs, clients %s\n", id, lines, o.width, o.mb, o.seconds, mode)
	return report(results)
}

// submit uploads the bench's job script and submits a job printing lines
// lines of o.width bytes; it returns the submission id.
func submit(ctx context.Context, url string, lines int, o options) (string, error) {
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url})
	if err != nil {
		return "", err
	}
	uri, err := c.UploadWorkingDir(ctx, filepath.Join("raysubmit", "testdata", "jobs"), raysubmit.PackageOptions{})
	if err != nil {
		return "", err
	}
	sub, err := c.Submit(ctx, raysubmit.SubmitRequest{
		Entrypoint: fmt.Sprintf("python lines.py %d %d %g", lines, o.width, o.seconds),
		RuntimeEnv: map[string]any{"working_dir": uri},
	})
	if err != nil {
		return "", err
	}
	return sub.SubmissionID, nil
}

// client is one log follower to measure.
type client struct {
	name string
	cmd  *exec.Cmd
}

// measureAll measures the clients at once, or one after the other.
func measureAll(sequential bool, clients []client) []result {
	results := make([]result, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { results[i] = measure(c.name, c.cmd) })
		if sequential {
			wg.Wait()
		}
	}
	wg.Wait()
	return results
}

// report prints one line per client and the ratios of the first to the
// second.
func report(results []result) error {
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
