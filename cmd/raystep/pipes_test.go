package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sethvargo/go-envconfig"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/test/raytest"
)

// lostReader is a stdout whose Dagster reader went away after reading the
// "opened" message: every later write fails.
type lostReader struct {
	mu     sync.Mutex
	writes int
}

var errReaderGone = errors.New("write /dev/stdout: broken pipe")

func (w *lostReader) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes++; w.writes > 1 {
		return 0, errReaderGone
	}
	return len(p), nil
}

// lostSessionEnv bootstraps a session whose messages go to stdout.
func lostSessionEnv(t *testing.T) map[string]string {
	t.Helper()
	env, err := pipes.BootstrapEnv(pipes.ContextDataParams(pipes.ContextData{AssetKeys: []string{"m"}, RunID: "r", Extras: map[string]any{}}),
		pipes.StdioMessagesParams("stdout"))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestRunSaysDagsterWasNotTold fails a step before the runner starts while
// Dagster's reader is gone: the step's own error keeps its exit code and
// message, and the failure to tell Dagster is on stderr too.
func TestRunSaysDagsterWasNotTold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{name: "invalid spec", args: []string{"run", "-f", train, "--set", "spec.timeouts.run=3 hours"}, wantErr: "/spec/timeouts/run"},
		{name: "unknown backend", env: map[string]string{"RAYSTEP_BACKEND": "slurm"}, args: []string{"run", "-f", train}, wantErr: `--backend "slurm"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := lostSessionEnv(t)
			for k, v := range tt.env {
				env[k] = v
			}
			var stderr bytes.Buffer
			a := &app{stdin: strings.NewReader(""), stdout: &lostReader{}, stderr: &stderr, lookup: envconfig.MapLookuper(env)}
			if code := a.main(context.Background(), tt.args); code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			got := stderr.String()
			if !strings.Contains(got, tt.wantErr) {
				t.Errorf("stderr lacks the step's error %q:\n%s", tt.wantErr, got)
			}
			lost := "raystep: report: close the dagster pipes session: write pipes message: " + errReaderGone.Error() + "\n"
			if n := strings.Count(got, errReaderGone.Error()); n != 1 || !strings.Contains(got, lost) {
				t.Errorf("stderr says %q %d times, want once, as %q:\n%s", errReaderGone, n, lost, got)
			}
		})
	}
}

// refusingReader is a stdout whose Dagster reader fails the lines that
// contain refuse, and takes every other line.
type refusingReader struct {
	refuse string
	mu     sync.Mutex
	b      bytes.Buffer
}

var errNoticeLost = errors.New("write /dev/stdout: resource temporarily unavailable")

func (w *refusingReader) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(w.refuse)) {
		return 0, errNoticeLost
	}
	return w.b.Write(p)
}

func (w *refusingReader) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestNoticeDagsterMissed runs a step that succeeds on an existing head
// (the session's shared one) with spec.cluster.reuse: run, which does not
// apply there, under a Dagster whose reader fails only the notice saying
// so: the notice is one of the step's warning events, and missing it makes
// the successful step an infrastructure failure (exit 3) that stderr names.
func TestNoticeDagsterMissed(t *testing.T) {
	env, err := pipes.BootstrapEnv(pipes.ContextDataParams(pipes.ContextData{AssetKeys: []string{"m"},
		RunID: raytest.RunID(t), Extras: map[string]any{}}), pipes.StdioMessagesParams("stdout"))
	if err != nil {
		t.Fatal(err)
	}
	env["RAYSTEP_RAY_BIN"] = raytest.RayBin(t)
	env["RAY_ADDRESS"] = rayHead.Head(t).DashboardURL()
	stdout := &refusingReader{refuse: "runs on an existing cluster already"}
	var stderr syncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: stdout, stderr: &stderr, lookup: envconfig.MapLookuper(env)}
	code := a.main(context.Background(), []string{"run", "-f", train,
		"--set", "spec.cluster.reuse=run", "--set", "spec.entrypoint=python -c pass"})
	if code != exitInfrastructure {
		t.Errorf("exit %d, want %d\nstderr:\n%s", code, exitInfrastructure, stderr.String())
	}
	want := "raystep: report: send log to dagster: write pipes message: " + errNoticeLost.Error() + "\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	out := stdout.String()
	for _, s := range []string{`"raystep provision: step `, `"raystep run: job `, `"method": "closed"`} {
		if !strings.Contains(out, s) {
			t.Errorf("Dagster was not told %s:\n%s", s, out)
		}
	}
}
