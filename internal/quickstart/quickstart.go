// Package quickstart makes raystep's start-up cheaper. The packages it
// links (the JSON Schema metaschemas above all) allocate a few
// MiB in their init functions, all of which stays live, so a garbage
// collection during init is work thrown away; and validate, render,
// schema and version end within milliseconds, so one during the command is
// too (together about 4 ms of a 20 ms start on a 2-core machine).
//
// This package's init turns the collector off. Once the command is known,
// raystep calls Brief for a command that ends at once (the collector stays
// off, but a soft memory limit brings it back should the command allocate
// more than a little, as a hostile spec may) or Done for any other (the
// collector as GOGC and GOMEMLIMIT set it). A command that follows a job
// for as long as it runs calls Brief while it validates, then Lean (the
// collector at a lower percentage than Go's default, unless GOGC says
// otherwise). Should none be called, the collector is back to normal
// after two seconds anyway.
//
// The same init runs the process on one processor (GOMAXPROCS=1) unless
// GOMAXPROCS says otherwise. raystep's commands wait on the network and on
// child processes: one processor runs a step as fast as two (a 200,000-line
// log too), without the second processor's thread spinning for work each
// time a goroutine wakes, which was about a sixth of a trivial step's CPU
// (test/bench). The commands that serve browsers (ui, dashboard,
// notebook) call Parallel for Go's default.
//
// Go initializes packages in import-path order among those whose imports
// are ready; this package imports only the runtime and time, and its path
// sorts before every heavy package raystep links (github.com/santhosh-tekuri,
// golang.org, google.golang.org, k8s.io, sigs.k8s.io), so its init runs
// before theirs. TestInitRunsFirst in cmd/raystep checks that order on the
// built binary.
package quickstart

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// The collector's settings before init turned it off (GOGC's percentage,
// 100 by default; GOMEMLIMIT's limit, none by default). Written once, by
// package initialization, before main runs.
var (
	gcPercent   = debug.SetGCPercent(-1)
	memoryLimit = debug.SetMemoryLimit(-1)
)

// steady is the collector's percentage once start-up is over: GOGC's,
// unless Lean chose another.
var steady atomic.Int64

// gcSet is whether GOGC was given; then Lean leaves the percentage alone.
var gcSet = os.Getenv("GOGC") != ""

// safetyNet turns the collector back on by itself should a program that
// links this package never call Done (a test binary, say), and ends a
// Brief command's exemption if it runs longer than its name says.
const safetyNet = 2 * time.Second

// processorsSet is whether GOMAXPROCS was given; then it is left alone.
var processorsSet = os.Getenv("GOMAXPROCS") != ""

func init() {
	steady.Store(int64(gcPercent))
	time.AfterFunc(safetyNet, Done)
	if !processorsSet {
		runtime.GOMAXPROCS(1)
	}
}

// Parallel gives a command that serves many clients at once Go's default
// number of processors, unless GOMAXPROCS was given.
func Parallel() {
	if !processorsSet {
		runtime.SetDefaultGOMAXPROCS()
	}
}

// Done turns the garbage collector back on as GOGC and GOMEMLIMIT set it
// (or as Lean chose). Calling it again does no harm.
func Done() {
	debug.SetMemoryLimit(memoryLimit)
	debug.SetGCPercent(int(steady.Load()))
}

// Lean is Done for a command that follows one job for as long as it runs,
// one process per step beside many others: the collector runs when the
// heap has grown by percent of what was live after the last collection,
// instead of GOGC's 100, unless GOGC was given. Such a command's live heap
// is small (about 3 MiB, nearly all of it the tables the linked packages
// build at init) and what it allocates is short-lived (log lines on their
// way through), so a collection costs well under a millisecond, while the
// heap it may grow to is what a step costs the machine in memory: at 50,
// about 2.5 MiB less at the peak of a 200,000-line log (test/bench).
func Lean(percent int) {
	if !gcSet {
		steady.Store(int64(percent))
	}
	Done()
}

// Brief keeps the collector off for a command that ends at once, with a
// soft memory limit of limit bytes (GOMEMLIMIT's, when lower) that brings
// the collector back whenever the heap nears it.
func Brief(limit int64) {
	debug.SetMemoryLimit(min(limit, memoryLimit))
}
