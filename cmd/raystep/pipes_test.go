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
	"github.com/raystep/raystep/runner"
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

// TestNoticeDagsterMissed sends a notice through a session whose reader is
// gone: the notice reaches stderr instead, and the failure makes a
// successful step an infrastructure failure.
func TestNoticeDagsterMissed(t *testing.T) {
	t.Parallel()
	env := lostSessionEnv(t)
	sess, err := pipes.Open(pipes.Options{LookupEnv: envconfig.MapLookuper(env).Lookup, Stdout: &lostReader{}, Stderr: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	log, err := newLogger("info", &stderr)
	if err != nil {
		t.Fatal(err)
	}
	n := &notices{sess: sess, log: log}
	n.send("teardown changed")
	if got, want := stderr.String(), "WARN\tteardown changed\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	err = n.failure()
	if !errors.Is(err, runner.ErrInfrastructure) || !errors.Is(err, errReaderGone) {
		t.Errorf("failure() = %v, want an infrastructure error wrapping %v", err, errReaderGone)
	}
	if code := exitCode(context.Background(), err); code != exitInfrastructure {
		t.Errorf("exit code %d, want %d", code, exitInfrastructure)
	}
}
