package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	sighup, cancelHup := context.WithCancelCause(context.Background())
	cancelHup(&signalError{sig: syscall.SIGHUP})
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
		{"sighup", sighup, context.Canceled, 129},
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

func TestLoadConfigKube(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    kubeConfig
		wantErr bool
	}{
		{"defaults", nil, kubeConfig{InCluster: true, HeartbeatInterval: 15 * time.Second, PortForwardGiveUp: 2 * time.Minute}, false},
		{"every setting", map[string]string{
			"RAYSTEP_KUBE_CONTEXT":         "prod",
			"RAYSTEP_DASHBOARD_IN_CLUSTER": "false", "RAYSTEP_DASHBOARD_CA_FILE": "/etc/ca.pem",
			"RAYSTEP_DASHBOARD_HEADERS": "X-Team:ads,X-Env:prod", "RAYSTEP_UNSCHEDULABLE_GRACE": "90s",
			"RAYSTEP_HEARTBEAT_INTERVAL": "5s", "KUBECONFIG": "/a:/b", "HOME": "/home/ml",
			"RAYSTEP_PORT_FORWARD_GIVE_UP": "20s",
		}, kubeConfig{
			Context: "prod", InCluster: false, DashboardCAFile: "/etc/ca.pem",
			DashboardHeaders: map[string]string{"X-Team": "ads", "X-Env": "prod"}, UnschedulableGrace: 90 * time.Second,
			HeartbeatInterval: 5 * time.Second, Kubeconfig: "/a:/b", Home: "/home/ml", PortForwardGiveUp: 20 * time.Second,
		}, false},
		{"bad duration is a usage error", map[string]string{"RAYSTEP_UNSCHEDULABLE_GRACE": "soon"}, kubeConfig{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := loadConfig(context.Background(), envconfig.MapLookuper(tt.env))
			if tt.wantErr {
				var usage *usageError
				if !errors.As(err, &usage) {
					t.Fatalf("loadConfig error = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.Kube); diff != "" {
				t.Errorf("kube config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadConfigErrorsNameTheVariable: a bad RAYSTEP_* value is a usage
// error that names the variable a person set and what was expected, not
// the Go field it fills.
func TestLoadConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"RAYSTEP_PORT_FORWARD_GIVE_UP=soon": `RAYSTEP_PORT_FORWARD_GIVE_UP="soon": expected a duration (e.g. 90s, 15m, 24h)`,
		"RAYSTEP_DASHBOARD_OUTAGE=-5s":      `RAYSTEP_DASHBOARD_OUTAGE="-5s": expected a duration that is not negative (e.g. 90s, 15m, 24h)`,
		"RAYSTEP_DASHBOARD_IN_CLUSTER=yes!": `RAYSTEP_DASHBOARD_IN_CLUSTER="yes!": expected true or false`,
		"RAYSTEP_DASHBOARD_OUTAGE=\x1b[2J":  `RAYSTEP_DASHBOARD_OUTAGE="\x1b[2J": expected a duration (e.g. 90s, 15m, 24h)`,
		// Zero would silently stand for the default.
		"RAYSTEP_DASHBOARD_OUTAGE=0":     `RAYSTEP_DASHBOARD_OUTAGE="0": expected a duration above zero (e.g. 90s, 15m, 24h); unset it for the default, 3m`,
		"RAYSTEP_HEARTBEAT_INTERVAL=0s":  `RAYSTEP_HEARTBEAT_INTERVAL="0s": expected a duration above zero (e.g. 90s, 15m, 24h); unset it for the default, 15s`,
		"RAYSTEP_PORT_FORWARD_GIVE_UP=0": `RAYSTEP_PORT_FORWARD_GIVE_UP="0": expected a duration above zero (e.g. 90s, 15m, 24h); unset it for the default, 2m`,
	} {
		name, value, _ := strings.Cut(env, "=")
		_, err := loadConfig(context.Background(), envconfig.MapLookuper(map[string]string{name: value}))
		var usage *usageError
		if !errors.As(err, &usage) || err.Error() != want {
			t.Errorf("%s: loadConfig error = %v, want the usage error %q", env, err, want)
		}
	}
	// Zero grace is a setting of its own: fail at once on an Unschedulable pod.
	c, err := loadConfig(context.Background(), envconfig.MapLookuper(map[string]string{"RAYSTEP_UNSCHEDULABLE_GRACE": "0"}))
	if err != nil || c.Kube.UnschedulableGrace != 0 {
		t.Errorf("RAYSTEP_UNSCHEDULABLE_GRACE=0: loadConfig = %v, %v; want no grace and no error", c, err)
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

// TestExitCodesMatchTheDagsterResource: the Dagster resource's EXIT_CODES
// (dagster_integration/dagster_raystep/resource.py), which turns raystep's
// exit code into the words a failed Dagster step shows, holds exactly
// the codes and meanings of exitCodes, and every code exitCode returns
// is in it.
func TestExitCodesMatchTheDagsterResource(t *testing.T) {
	t.Parallel()
	const file = "../../dagster_integration/dagster_raystep/resource.py"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)\nEXIT_CODES: Mapping\[int, str\] = \{\n(.*?)\n\}`).FindSubmatch(src)
	if block == nil {
		t.Fatalf("%s: no EXIT_CODES table", file)
	}
	py := map[int]string{}
	for _, line := range strings.Split(string(block[1]), "\n") {
		m := regexp.MustCompile(`^    (\d+): "([^"]*)",$`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: EXIT_CODES line %q is not `    CODE: \"MEANING\",`", file, line)
		}
		code, _ := strconv.Atoi(m[1])
		py[code] = m[2]
	}
	goTable := map[int]string{}
	for _, c := range exitCodes {
		goTable[c.code] = c.meaning
	}
	if diff := cmp.Diff(goTable, py); diff != "" {
		t.Errorf("EXIT_CODES in %s differs from exitCodes (-go +python):\n%s", file, diff)
	}
	for _, code := range []int{exitJobFailed, exitUsage, exitInfrastructure, exitSIGHUP, exitSIGINT, exitSIGTERM} {
		if _, ok := goTable[code]; !ok {
			t.Errorf("exit code %d has no meaning in exitCodes", code)
		}
	}
}
