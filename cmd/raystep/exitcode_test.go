package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/sethvargo/go-envconfig"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

func TestExitCode(t *testing.T) {
	t.Parallel()
	sigint, cancelInt := context.WithCancelCause(context.Background())
	cancelInt(&signalError{sig: os.Interrupt})
	sigterm, cancelTerm := context.WithCancelCause(context.Background())
	cancelTerm(&signalError{sig: syscall.SIGTERM})
	bg := context.Background()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"ok", bg, nil, 0},
		{"job failed", bg, fmt.Errorf("step: %w", runner.ErrJobFailed), 1},
		{"job stopped", bg, runner.ErrJobStopped, 1},
		{"invalid spec", bg, fmt.Errorf("load: %w", &schemas.ValidationErrors{}), 2},
		{"usage", bg, &usageError{errors.New("bad flag")}, 2},
		{"infrastructure", bg, runner.ErrInfrastructure, 3},
		{"unknown error", bg, errors.New("boom"), 3},
		{"failed job and broken teardown", bg, errors.Join(runner.ErrJobFailed, runner.ErrInfrastructure), 1},
		{"sigint", sigint, context.Canceled, 130},
		{"sigterm wins over job outcome", sigterm, runner.ErrJobFailed, 143},
		{"signal in error", bg, fmt.Errorf("cancelled: %w", &signalError{sig: syscall.SIGTERM}), 143},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := exitCode(tt.ctx, tt.err); got != tt.want {
				t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(context.Background(), envconfig.MapLookuper(map[string]string{
		"RAYSTEP_PROFILE": "p.yaml", "RAYSTEP_BACKEND": "kuberay",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile != "p.yaml" || c.Backend != "kuberay" || c.RayBin != "" || c.LogLevel != "info" {
		t.Errorf("config = %+v", c)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
