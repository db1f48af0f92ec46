// Command bench measures raystep's own overhead per step on a running Ray
// head, side by side with Ray's job CLI: the same entrypoint, submitted to
// the same head, by `raystep run` (RAY_ADDRESS mode, standalone; also
// without a state dir, so without keeping the step's history) and by `ray
// job submit` (which also waits for the job and prints its log), in
// alternation. Two jobs: a trivial one (print('ok')) and one that prints
// -lines numbered lines and an unterminated last one.
//
// For each tool and job it prints the median wall time, Ray's own job time
// (the job's start_time to end_time, as the Jobs API reports them), the
// wall time beyond it, the child's CPU time (user+sys, from rusage) and
// peak RSS, and how many log lines the tool lost or repeated.
//
//	make build && go run ./test/bench -n 9 [-dagster]
//
// With -dagster it then runs the same jobs under Dagster, RaystepResource
// against dagster-ray's PipesRayJobClient (test/bench/dagster_bench.py),
// on the same head.
//
// Without -address it starts a private head (rayhead.Start) and stops it
// at the end.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raystep/raystep/rayhead"
)

// sample is one measured run of a child process.
type sample struct {
	wall, cpu, job time.Duration
	maxRSS         int64 // bytes
	lost, repeated int
}

// job is what the tools run.
type job struct {
	name string
	// set are raystep run's overrides of the bench spec; args the
	// arguments of `ray job submit` after --address and --submission-id.
	set, args []string
	// lines is how many numbered lines the job prints, besides its
	// unterminated last one; 0 checks none.
	lines int
}

// tool runs one job and returns the command and how to find the job's
// submission id once it ended.
type tool struct {
	name string
	cmd  func(j job) (*exec.Cmd, func(stderr []byte) string)
}

func main() {
	n := flag.Int("n", 9, "runs per tool and job")
	raystep := flag.String("raystep", "bin/raystep", "raystep binary")
	address := flag.String("address", "", "dashboard URL of a running head; empty starts one")
	rayBin := flag.String("ray", "", "ray executable (default: .venv/bin/ray, else PATH)")
	lines := flag.Int("lines", 200_000, "lines the log job prints")
	onlyDagster := flag.Bool("only-dagster", false, "skip the standalone jobs")
	dagster := flag.Bool("dagster", false, "then the same jobs under Dagster: RaystepResource against dagster-ray (test/bench/dagster_bench.py)")
	flag.Parse()
	if err := bench(*n, *raystep, *address, *rayBin, *lines, *dagster || *onlyDagster, *onlyDagster); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func bench(n int, raystep, address, rayBin string, lines int, dagster, onlyDagster bool) error {
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
	jobs := []job{
		{name: "trivial", set: nil, args: []string{"--entrypoint-num-cpus", "0.1", "--", "python", "-c", "print('ok')"}},
		{name: fmt.Sprintf("%d-line log", lines), lines: lines,
			set:  []string{"spec.entrypoint=python lines.py " + strconv.Itoa(lines), "spec.workingDir=."},
			args: []string{"--entrypoint-num-cpus", "0.1", "--working-dir", "test/bench", "--", "python", "lines.py", strconv.Itoa(lines)}},
	}
	submitted := regexp.MustCompile(`"submission_id":"([^"]+)"`)
	// raystep keeps each step's history in a state dir of the bench's own;
	// the row without it (no HOME, no XDG_STATE_HOME: no state dir) shows
	// what keeping it costs.
	state, err := os.MkdirTemp("", "raystep-bench-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	raystepRun := func(env []string) func(j job) (*exec.Cmd, func([]byte) string) {
		return func(j job) (*exec.Cmd, func([]byte) string) {
			args := []string{"run", "-f", "test/bench/trivial.yaml", "--log-format", "json"}
			for _, s := range j.set {
				args = append(args, "--set", s)
			}
			c := exec.Command(raystep, args...)
			c.Env = append(env, "RAY_ADDRESS="+address)
			return c, func(stderr []byte) string {
				if m := submitted.FindSubmatch(stderr); m != nil {
					return string(m[1])
				}
				return ""
			}
		}
	}
	var stateless []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			stateless = append(stateless, kv)
		}
	}
	tools := []tool{
		{"raystep run", raystepRun(append(os.Environ(), "XDG_STATE_HOME="+state))},
		{"raystep run, no history", raystepRun(stateless)},
		{"ray job submit", func(j job) (*exec.Cmd, func([]byte) string) {
			id := newID()
			c := exec.Command(ray, append([]string{"job", "submit", "--address", address, "--submission-id", id}, j.args...)...)
			c.Env = os.Environ()
			return c, func([]byte) string { return id }
		}},
	}
	if onlyDagster {
		jobs = nil
	}
	results := make([][][]sample, len(jobs))
	for k, j := range jobs {
		results[k] = make([][]sample, len(tools))
		// One warm-up run each, then alternate so drift hits both alike.
		for i := -1; i < n; i++ {
			for t, tl := range tools {
				s, err := measure(address, j, tl)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", tl.name, j.name, err)
				}
				if i >= 0 {
					results[k][t] = append(results[k][t], s)
				}
			}
		}
	}
	fmt.Printf("head %s, %d runs of each tool and job (after one warm-up), medians\n\n", address, n)
	fmt.Printf("| job | tool | wall | Ray's job time | wall beyond it | CPU | peak RSS | lines lost | repeated |\n")
	fmt.Printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for k, j := range jobs {
		for t, tl := range tools {
			ss := results[k][t]
			var rss int64
			lost, repeated := 0, 0
			for _, s := range ss {
				rss, lost, repeated = max(rss, s.maxRSS), max(lost, s.lost), max(repeated, s.repeated)
			}
			beyond := durations(ss, func(s sample) time.Duration { return s.wall - s.job })
			fmt.Printf("| %s | %s | %s | %s | %s (%s–%s) | %s | %.1f MiB | %d | %d |\n", j.name, tl.name,
				ms(median(durations(ss, func(s sample) time.Duration { return s.wall }))),
				ms(median(durations(ss, func(s sample) time.Duration { return s.job }))),
				ms(median(beyond)), ms(beyond[0]), ms(beyond[len(beyond)-1]),
				ms(median(durations(ss, func(s sample) time.Duration { return s.cpu }))),
				float64(rss)/(1<<20), lost, repeated)
		}
	}
	if !dagster {
		return nil
	}
	fmt.Println()
	py := exec.Command(".venv/bin/python", "test/bench/dagster_bench.py", "--address", address, "-n", strconv.Itoa(n),
		"--lines", strconv.Itoa(lines), "--raystep", raystep)
	py.Stdout, py.Stderr = os.Stdout, os.Stderr
	return py.Run()
}

// measure runs one job with one tool to completion and reads its rusage,
// Ray's times of the job and the log lines the tool printed.
func measure(address string, j job, tl tool) (sample, error) {
	cmd, idOf := tl.cmd(j)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w\n%s", cmd.Path, err, stderr.Bytes())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	s := sample{wall: wall, cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), maxRSS: ru.Maxrss << 10}
	id := idOf(stderr.Bytes())
	if id == "" {
		return sample{}, fmt.Errorf("no submission id in the output:\n%s", stderr.Bytes())
	}
	if s.job, err = jobTime(address, id); err != nil {
		return sample{}, err
	}
	if j.lines > 0 {
		s.lost, s.repeated = countLines(stdout.Bytes(), j.lines)
	}
	return s, nil
}

// jobTime is the job's run time as Ray reports it: end_time - start_time.
func jobTime(address, id string) (time.Duration, error) {
	resp, err := http.Get(address + "/api/jobs/" + id)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var info struct {
		Status    string `json:"status"`
		StartTime int64  `json:"start_time"`
		EndTime   int64  `json:"end_time"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return 0, fmt.Errorf("job %s: %w", id, err)
	}
	if info.Status != "SUCCEEDED" || info.EndTime < info.StartTime {
		return 0, fmt.Errorf("job %s: status %s, times %d–%d", id, info.Status, info.StartTime, info.EndTime)
	}
	return time.Duration(info.EndTime-info.StartTime) * time.Millisecond, nil
}

// countLines counts the numbered lines "line N" (0 <= N < want) and the
// unterminated last one "line end" in out: how many of them are missing,
// and how many came more than once.
func countLines(out []byte, want int) (lost, repeated int) {
	seen := make([]int, want+1)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("line "))
		if !ok {
			continue
		}
		if string(rest) == "end" {
			seen[want]++
			continue
		}
		if i, err := strconv.Atoi(string(rest)); err == nil && i >= 0 && i < want {
			seen[i]++
		}
	}
	for _, c := range seen {
		switch {
		case c == 0:
			lost++
		case c > 1:
			repeated += c - 1
		}
	}
	return lost, repeated
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
