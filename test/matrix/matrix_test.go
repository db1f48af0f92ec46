package matrix

import (
	"fmt"
	"testing"
)

// TestSampleCovers: whatever the seed and shape, every row and every
// column is in the sample, no cell twice; and across seeds every cell of
// a 4 × 4 matrix is drawn by some commit.
func TestSampleCovers(t *testing.T) {
	t.Parallel()
	drawn := map[Cell]bool{}
	for seed := range uint64(200) {
		for _, shape := range [][2]int{{4, 4}, {2, 5}, {5, 2}, {1, 1}} {
			rows, cols := shape[0], shape[1]
			cells := Sample(seed, rows, cols)
			if len(cells) != max(rows, cols) {
				t.Fatalf("seed %d, %dx%d: %d cells", seed, rows, cols, len(cells))
			}
			seenRow, seenCol, seen := map[int]bool{}, map[int]bool{}, map[Cell]bool{}
			for _, c := range cells {
				if seen[c] {
					t.Errorf("seed %d, %dx%d: cell %v twice", seed, rows, cols, c)
				}
				seen[c], seenRow[c.Row], seenCol[c.Col] = true, true, true
				if rows == 4 && cols == 4 {
					drawn[c] = true
				}
			}
			if len(seenRow) != rows || len(seenCol) != cols {
				t.Errorf("seed %d, %dx%d: rows %v, columns %v", seed, rows, cols, seenRow, seenCol)
			}
		}
	}
	if len(drawn) != 16 {
		t.Errorf("200 seeds drew %d of the 16 cells", len(drawn))
	}
	if fmt.Sprint(Sample(7, 4, 4)) != fmt.Sprint(Sample(7, 4, 4)) {
		t.Error("the same seed drew two samples")
	}
}

// TestCellsFull: RAYSTEP_TEST_FULL=1 gives every cell.
func TestCellsFull(t *testing.T) {
	t.Setenv("RAYSTEP_TEST_FULL", "1")
	if got := len(Cells(t, 4, 4)); got != 16 {
		t.Errorf("%d cells, want 16", got)
	}
	t.Setenv("RAYSTEP_TEST_FULL", "")
	t.Setenv("RAYSTEP_TEST_SEED", "abc")
	if got := len(Cells(t, 4, 4)); got != 4 {
		t.Errorf("%d cells, want 4", got)
	}
}
