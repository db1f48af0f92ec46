// Command startup measures how long raystep's commands that never talk to
// a cluster take as a whole process: exec, Go runtime and package init,
// the command's work and exit. For each binary it runs `validate -f
// examples/ads_ranking/train.yaml`, `schema` and `version` -n times (after
// one warm-up, interleaved so that drift hits all alike) and prints the
// median and p90 of wall time and of the child's CPU time (user+sys, from
// rusage).
//
//	make build && go run ./test/bench/startup -bin after=bin/raystep
//	test/bench/startup.sh 603918b   # before (that commit), floor and after
//
// Run it from the repository root: validate reads the example spec and its
// working directory relative to the current directory. The script also
// measures test/bench/startup/linkfloor as "floor" (it ignores the
// arguments): the start-up that linking raystep's heaviest dependencies
// costs by itself.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// binary is one raystep executable under test, with the label it is
// printed under.
type binary struct{ label, path string }

// binaries collects repeated -bin LABEL=PATH flags.
type binaries []binary

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(v string) error {
	label, path, ok := strings.Cut(v, "=")
	if !ok {
		label, path = v, v
	}
	*b = append(*b, binary{label, path})
	return nil
}

// commands are the measured command lines.
var commands = [][]string{
	{"validate", "-f", "examples/ads_ranking/train.yaml"},
	{"schema"},
	{"version"},
}

// sample is one measured run.
type sample struct{ wall, cpu time.Duration }

func main() {
	var bins binaries
	flag.Var(&bins, "bin", "LABEL=PATH of a raystep binary (repeatable; default after=bin/raystep)")
	n := flag.Int("n", 30, "runs per binary and command")
	flag.Parse()
	if len(bins) == 0 {
		bins = binaries{{"after", "bin/raystep"}}
	}
	results, err := measureAll(bins, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "startup:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, bins, results, *n)
}

// measureAll runs every command of every binary n times after one
// warm-up, in alternation. results[b][c] are binary b's samples of
// command c.
func measureAll(bins binaries, n int) ([][][]sample, error) {
	results := make([][][]sample, len(bins))
	for b := range bins {
		results[b] = make([][]sample, len(commands))
	}
	for i := -1; i < n; i++ {
		for b, bin := range bins {
			for c, args := range commands {
				s, err := measure(bin.path, args)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", bin.label, strings.Join(args, " "), err)
				}
				if i >= 0 {
					results[b][c] = append(results[b][c], s)
				}
			}
		}
	}
	return results, nil
}

// measure runs path with args to completion and reads its rusage; the
// command must succeed.
func measure(path string, args []string) (sample, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return sample{}, fmt.Errorf("exit code %d", ee.ExitCode())
	}
	if err != nil {
		return sample{}, err
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{wall: wall, cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}, nil
}

// printTable writes one row per binary and command.
func printTable(w io.Writer, bins binaries, results [][][]sample, n int) {
	fmt.Fprintf(w, "%d runs each after one warm-up; wall and CPU (user+sys) of the whole process\n\n", n)
	fmt.Fprintf(w, "%-8s %-44s %11s %9s %11s %9s\n", "binary", "arguments", "wall median", "wall p90", "CPU median", "CPU p90")
	for b, bin := range bins {
		for c, args := range commands {
			wall := sorted(results[b][c], func(s sample) time.Duration { return s.wall })
			cpu := sorted(results[b][c], func(s sample) time.Duration { return s.cpu })
			fmt.Fprintf(w, "%-8s %-44s %11s %9s %11s %9s\n", bin.label, strings.Join(args, " "),
				ms(quantile(wall, 0.5)), ms(quantile(wall, 0.9)), ms(quantile(cpu, 0.5)), ms(quantile(cpu, 0.9)))
		}
	}
}

// sorted returns the field f of every sample, in ascending order.
func sorted(ss []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	slices.Sort(out)
	return out
}

// quantile returns the q-quantile of sorted d (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
