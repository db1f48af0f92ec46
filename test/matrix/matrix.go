// Package matrix chooses which cells of a test matrix (signal × phase and
// the like) a run covers. `make test` runs a covering sample: every row
// once and every column once, the sample chosen from the commit under test
// so that successive commits cover different cells. `make test-full`
// (RAYSTEP_TEST_FULL=1) runs every cell. A cell is never hidden behind a
// flag that CI does not set: some commit's `make test` runs each one.
package matrix

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Cell is one cell of a matrix, by row and column index.
type Cell struct{ Row, Col int }

// Full reports whether every cell runs: RAYSTEP_TEST_FULL=1.
func Full() bool { return os.Getenv("RAYSTEP_TEST_FULL") == "1" }

// Cells returns the cells of a rows × cols matrix that t's run covers:
// all of them under Full, else max(rows, cols) cells in which every row
// and every column appears, drawn with Seed. It logs which and why.
func Cells(t testing.TB, rows, cols int) []Cell {
	t.Helper()
	if Full() {
		cells := make([]Cell, 0, rows*cols)
		for r := range rows {
			for c := range cols {
				cells = append(cells, Cell{r, c})
			}
		}
		t.Logf("RAYSTEP_TEST_FULL=1: all %d cells", len(cells))
		return cells
	}
	seed, from := Seed()
	cells := Sample(seed, rows, cols)
	t.Logf("%d of %d cells, every row and column once, drawn from %s (make test-full runs all)", len(cells), rows*cols, from)
	return cells
}

// Sample returns max(rows, cols) cells of a rows × cols matrix in which
// every row and every column appears, a function of seed alone.
func Sample(seed uint64, rows, cols int) []Cell {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	rowOrder, colOrder := r.Perm(rows), r.Perm(cols)
	n := max(rows, cols)
	cells := make([]Cell, n)
	for i := range n {
		cells[i] = Cell{rowOrder[i%rows], colOrder[i%cols]}
	}
	return cells
}

// Seed returns the seed of this run's sample and where it came from:
// RAYSTEP_TEST_SEED (any string, to repeat a run), else the first 12
// hex digits of the commit checked out, else "1".
func Seed() (uint64, string) {
	if s := os.Getenv("RAYSTEP_TEST_SEED"); s != "" {
		return hashOf(s), "RAYSTEP_TEST_SEED=" + s
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if commit := strings.TrimSpace(string(out)); err == nil && len(commit) >= 12 {
		return hashOf(commit[:12]), "commit " + commit[:12] + " (RAYSTEP_TEST_SEED=" + commit[:12] + " repeats it)"
	}
	return hashOf("1"), "a fixed seed, RAYSTEP_TEST_SEED=1 (no git checkout)"
}

// hashOf is FNV-1a of s.
func hashOf(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}
