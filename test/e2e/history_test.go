package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// finished is what ls --finished -o json says of a step.
type finished struct {
	Name     string             `json:"name"`
	Reason   string             `json:"reason"`
	ExitCode int                `json:"exit_code"`
	Status   string             `json:"status"`
	Phases   map[string]float64 `json:"phases"`
	Log      struct{ Bytes, Kept int64 }
}

// finishedSteps runs ls --finished -o json in state.
func finishedSteps(t *testing.T, state string) []finished {
	t.Helper()
	code, out, errOut := runRay(t, map[string]string{"XDG_STATE_HOME": state}, "ls", "--finished", "-o", "json")
	var fs []finished
	if err := json.Unmarshal([]byte(out), &fs); code != 0 || err != nil {
		t.Fatalf("ls --finished -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return fs
}

// TestRunKeepsHistory: after a step on an existing head ended, succeeded
// or failed, ls --finished shows how, and logs prints its driver log byte
// for byte as run relayed it, an unterminated last line included.
func TestRunKeepsHistory(t *testing.T) {
	t.Parallel()
	h := ray.Head(t)
	state := t.TempDir()
	env := map[string]string{"RAY_ADDRESS": h.DashboardURL(), "XDG_STATE_HOME": state}
	steps := []struct {
		entrypoint, reason string
		code               int
	}{
		{`python -c "import sys; [print('line', i) for i in range(500)]; sys.stdout.write('no newline')"`, "succeeded", exitOK},
		{`python -c "print('about to fail', flush=True); raise SystemExit(3)"`, "failed", exitJobFailed},
	}
	var stdouts []string
	for _, s := range steps {
		code, stdout, stderr := runRay(t, env, "run", "-f", train, "--set", "spec.entrypoint="+s.entrypoint)
		if code != s.code {
			t.Fatalf("%s: exit %d, want %d\n%s", s.entrypoint, code, s.code, stderr)
		}
		stdouts = append(stdouts, stdout)
	}
	fs := finishedSteps(t, state)
	if len(fs) != 2 {
		t.Fatalf("ls --finished lists %d steps, want 2: %+v", len(fs), fs)
	}
	for i, f := range []finished{fs[1], fs[0]} { // the latest first
		if f.Reason != steps[i].reason || f.ExitCode != steps[i].code || f.Phases["run"] <= 0 {
			t.Errorf("step %d recorded as %+v, want reason %s, exit %d and its run phase", i, f, steps[i].reason, steps[i].code)
		}
		code, log, errOut := runRay(t, map[string]string{"XDG_STATE_HOME": state}, "logs", f.Name)
		if code != 0 || log != stdouts[i] {
			t.Errorf("logs %s: exit %d, %d bytes; run relayed %d bytes (%s)\nlogs: %q\nrun:  %q", f.Name, code, len(log),
				len(stdouts[i]), errOut, tail(log), tail(stdouts[i]))
		}
		if f.Log.Bytes != int64(len(stdouts[i])) || f.Log.Kept != f.Log.Bytes {
			t.Errorf("step %d's record counts %+v of the log, run relayed %d bytes", i, f.Log, len(stdouts[i]))
		}
	}
	if !strings.HasSuffix(stdouts[0], "line 499\nno newline\n") { // run ends the last line
		t.Errorf("run lost the unterminated last line: %q", tail(stdouts[0]))
	}
}

func tail(s string) string { return s[max(0, len(s)-80):] }
