package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The records of running steps: while a step runs on a private head, its
// backend keeps STEP_ID.json in the steps dir (StepsDir), written to a
// temporary file and renamed, so that `raystep ls` and `raystep ui` on this
// machine show it beside the interactive clusters: its status as it
// changes, how its job ended while the head goes, and nothing once the
// head is gone. A step's raystep that was killed leaves its record behind;
// readers skip a record whose raystep no longer runs (ListSteps).

// StepRecord is one running step on a private head of this machine. It
// never holds the head's token, only the file that does.
type StepRecord struct {
	// ID is the step attempt's id (the Ray submission id).
	ID string `json:"id"`
	// Name, Owner and Kind are the spec's.
	Name  string `json:"name"`
	Owner string `json:"owner,omitempty"`
	Kind  string `json:"kind"`
	// RunID and Asset are the Dagster run and asset keys (slash-joined
	// parts, comma between keys); empty standalone.
	RunID string `json:"runId"`
	Asset string `json:"asset,omitempty"`
	// Created is when its head was ready.
	Created time.Time `json:"created"`
	// DashboardURL is the head's dashboard; TokenFile the 0600 file with
	// its token.
	DashboardURL string `json:"dashboardURL"`
	TokenFile    string `json:"tokenFile"`
	// State is "ready" once the head is up, "Running" once the job is
	// submitted; JobStatus the Ray job's end (SUCCEEDED, FAILED, STOPPED)
	// while the head is torn down.
	State     string `json:"state"`
	JobStatus string `json:"jobStatus,omitempty"`
	// Pid is the step's raystep process.
	Pid int `json:"pid"`
}

// StepsDir is the steps dir beside the state dir of interactive clusters
// (StateDir).
func StepsDir(stateDir string) string { return filepath.Join(filepath.Dir(stateDir), "steps") }

// stepFile is the record of the step id in dir.
func stepFile(dir, id string) string { return filepath.Join(dir, id+".json") }

// writeStep writes r to dir atomically.
func writeStep(dir string, r StepRecord) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("record step %s: %w", r.ID, err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("record step %s: %w", r.ID, err)
	}
	tmp, err := os.CreateTemp(dir, "."+r.ID+".*")
	if err != nil {
		return fmt.Errorf("record step %s: %w", r.ID, err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), stepFile(dir, r.ID))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("record step %s: %w", r.ID, err)
	}
	return nil
}

// removeStep removes the record of the step id from dir.
func removeStep(dir, id string) error {
	if err := os.Remove(stepFile(dir, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the record of step %s: %w", id, err)
	}
	return nil
}

// ListSteps returns the records in dir of steps whose raystep still runs,
// by id; none when dir does not exist.
func ListSteps(dir string) ([]StepRecord, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []StepRecord
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // its step ended meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read step record %s: %w", p, err)
		}
		var r StepRecord
		if err := json.Unmarshal(b, &r); err != nil || r.ID != strings.TrimSuffix(filepath.Base(p), ".json") {
			continue // not one of raystep's
		}
		if !raystepRuns(r.Pid) {
			continue // killed: its head went with it (the keeper's fate)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// raystepRuns says whether pid is a live process whose command is a raystep
// (a pid reused by something else is not).
func raystepRuns(pid int) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "cmdline"))
	if err != nil || len(cmdline) == 0 {
		return false
	}
	exe, _, _ := strings.Cut(string(cmdline), "\x00")
	self, _ := os.Executable()
	return strings.Contains(filepath.Base(exe), "raystep") || filepath.Base(exe) == filepath.Base(self)
}
