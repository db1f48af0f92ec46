package quickstart

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestBriefThenDone: init turned the collector off; Brief keeps it off
// under a memory limit; Done restores what GOGC and GOMEMLIMIT had (100
// and no limit when unset), and a second Done changes nothing.
func TestBriefThenDone(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set; the test checks the defaults")
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("before Done the collector is at %d%%, want off (-1)", got)
	}
	Brief(64 << 20)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Errorf("Brief(64 MiB) left the memory limit at %d", got)
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("Brief turned the collector on (%d%%)", got)
	}
	Done()
	Done()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Done the collector is at %d%%, want GOGC's 100", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after Done the memory limit is %d, want none", got)
	}
}

// TestOneProcessorThenParallel: init left the process one processor;
// Parallel gives back Go's default. A GOMAXPROCS the user set wins.
func TestOneProcessorThenParallel(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set; the test checks the default")
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after init GOMAXPROCS is %d, want 1", got)
	}
	Parallel()
	if got, want := runtime.GOMAXPROCS(0), runtime.NumCPU(); got != want && want > 1 {
		// The default also honours a CPU quota, so it may be below NumCPU.
		t.Logf("after Parallel GOMAXPROCS is %d (NumCPU %d)", got, want)
		if got == 1 {
			t.Errorf("Parallel left GOMAXPROCS at 1 on a %d-CPU machine", want)
		}
	}
}

// TestLean: Lean sets the collector's percentage when GOGC is unset, and
// a later Done (the safety net's) keeps it instead of going back to 100.
func TestLean(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set; the test checks the defaults")
	}
	t.Cleanup(func() { steady.Store(int64(gcPercent)); Done() })
	Lean(50)
	if got := debug.SetGCPercent(-1); got != 50 {
		t.Errorf("after Lean(50) the collector is at %d%%, want 50", got)
	}
	Done()
	if got := debug.SetGCPercent(-1); got != 50 {
		t.Errorf("a Done after Lean(50) put the collector at %d%%, want 50", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after Lean the memory limit is %d, want none", got)
	}
	Done()
}

// TestLeanLeavesGOGC: with GOGC given, Lean keeps GOGC's percentage.
func TestLeanLeavesGOGC(t *testing.T) {
	was := gcSet
	gcSet = true
	t.Cleanup(func() { gcSet = was; steady.Store(int64(gcPercent)); Done() })
	Lean(50)
	if got := debug.SetGCPercent(-1); got != gcPercent {
		t.Errorf("with GOGC given, Lean(50) put the collector at %d%%, want GOGC's %d", got, gcPercent)
	}
}
