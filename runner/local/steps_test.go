package local

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestListStepsSkipsWhatNoRaystepRuns: ls and ui list the records of
// steps whose raystep runs, not those a killed raystep left, nor a record
// whose pid now belongs to another program, nor a file that is no record.
func TestListStepsSkipsWhatNoRaystepRuns(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "steps")
	live := StepRecord{ID: "raystep-train-1", Name: "train", Owner: "ads", Kind: "train", Created: time.Now().UTC(),
		State: "Running", Pid: os.Getpid()}
	for _, r := range []StepRecord{live, {ID: "raystep-gone-2", Pid: 0}, {ID: "raystep-init-3", Pid: 1}} {
		if err := writeStep(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.json"), []byte("not a record"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ListSteps(dir)
	if err != nil || len(got) != 1 || got[0].ID != live.ID || got[0].State != "Running" || got[0].Owner != "ads" {
		t.Fatalf("ListSteps = %+v, %v; want the live step only", got, err)
	}
	if err := removeStep(dir, live.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := ListSteps(dir); err != nil || len(got) != 0 {
		t.Errorf("after removeStep: %+v, %v; want none", got, err)
	}
	if got, err := ListSteps(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Errorf("a missing dir: %+v, %v; want none", got, err)
	}
}
