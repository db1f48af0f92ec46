package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sethvargo/go-envconfig"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner"
)

// TestLogFormatFlagWins: --log-format beats RAYSTEP_LOG_FORMAT, which
// beats the default.
func TestLogFormatFlagWins(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		flag string
		want string // how the line starts
	}{
		{want: "[    3.0s] run"},
		{env: map[string]string{"RAYSTEP_LOG_FORMAT": "json"}, want: `{"time":`},
		{env: map[string]string{"RAYSTEP_LOG_FORMAT": "json"}, flag: "logfmt", want: "time="},
	}
	for _, tt := range tests {
		cfg, err := loadConfig(context.Background(), envconfig.MapLookuper(tt.env))
		if err != nil {
			t.Fatal(err)
		}
		a := &app{cfg: cfg, logFormat: tt.flag}
		var w bytes.Buffer
		sink, err := a.eventSink(&w)
		if err != nil {
			t.Fatal(err)
		}
		sink.Event(runner.Event{Time: time.Now(), Elapsed: 3 * time.Second, Phase: runner.PhaseRun, Kind: runner.KindNote, Message: "ok"})
		if !strings.HasPrefix(w.String(), tt.want) {
			t.Errorf("env %v --log-format %q: %q, want it to start %q", tt.env, tt.flag, w.String(), tt.want)
		}
	}
}

func TestAbortOf(t *testing.T) {
	t.Parallel()
	if ch := fleet.Abort(context.Background()); ch != nil {
		t.Errorf("fleet.Abort(no abort) = %v, want nil", ch)
	}
	abort := make(chan struct{})
	ctx := fleet.WithAbort(context.Background(), abort)
	close(abort)
	select {
	case <-fleet.Abort(ctx):
	default:
		t.Error("fleet.Abort(ctx) is not the channel given to withAbort")
	}
}

// TestSignalContext sends this process SIGTERM twice: the first cancels
// the context with the signal as cause, the second closes abort.
func TestSignalContext(t *testing.T) {
	ctx, stop := signalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the first SIGTERM did not cancel the context")
	}
	if code := exitCode(ctx, context.Cause(ctx)); code != exitSIGTERM {
		t.Errorf("exit code = %d, want %d", code, exitSIGTERM)
	}
	select {
	case <-fleet.Abort(ctx):
		t.Fatal("abort closed after one signal")
	default:
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fleet.Abort(ctx):
	case <-time.After(time.Minute):
		t.Fatal("the second SIGTERM did not close abort")
	}
}

// TestLogFormatBadValue: an unknown format is a usage error (exit 2) that
// names the flag or variable and the choices, before anything starts.
func TestLogFormatBadValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{name: "variable", env: map[string]string{"RAYSTEP_LOG_FORMAT": "yaml"}, args: []string{"run", "-f", train},
			want: "raystep: RAYSTEP_LOG_FORMAT=\"yaml\": want auto, text, json or logfmt\nRun 'raystep run --help' for usage.\n"},
		{name: "flag", env: map[string]string{"RAYSTEP_LOG_FORMAT": "json"}, args: []string{"run", "-f", train, "--log-format", "JSON"},
			want: "raystep: --log-format=\"JSON\": want auto, text, json or logfmt\nRun 'raystep run --help' for usage.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTest(t, tt.env, tt.args...)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d", code, exitUsage)
			}
			if diff := cmp.Diff(tt.want, stderr); diff != "" || stdout != "" {
				t.Errorf("stdout %q; stderr (-want +got):\n%s", stdout, diff)
			}
		})
	}
}
