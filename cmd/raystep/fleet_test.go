package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sethvargo/go-envconfig"
	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
)

// fakeFleet is a fleet.Fleet of function fields; a nil one is not here.
type fakeFleet struct {
	list    func(fleet.Scope) ([]fleet.Record, error)
	gc      func(fleet.Scope, fleet.GCOptions, func(string)) error
	downRun func(fleet.Scope, string, func(string)) error
}

func (f *fakeFleet) DownRun(_ context.Context, s fleet.Scope, runID string, gone func(string)) error {
	if f.downRun == nil {
		return fleet.ErrNotHere
	}
	return f.downRun(s, runID, gone)
}

func (f *fakeFleet) List(_ context.Context, s fleet.Scope) ([]fleet.Record, error) {
	if f.list == nil {
		return nil, fleet.ErrNotHere
	}
	return f.list(s)
}

func (f *fakeFleet) GC(_ context.Context, s fleet.Scope, o fleet.GCOptions, line func(string)) error {
	if f.gc == nil {
		return fleet.ErrNotHere
	}
	return f.gc(s, o, line)
}

// runFleets runs raystep with args against fleets instead of the
// backends, and returns its exit code, stdout and stderr.
func runFleets(t *testing.T, fleets []fleet.Fleet, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, lookup: envconfig.MapLookuper(nil),
		newFleets: func(*cobra.Command, string) ([]fleet.Fleet, error) { return fleets, nil }}
	code := a.main(context.Background(), args)
	return code, out.String(), errOut.String()
}

// TestLsAsksEveryFleet: ls lists every backend's records in order, in
// the scope the flags give, leaves out a backend that is not here, and
// fails (exit 3, nothing printed) when one that is here fails.
func TestLsAsksEveryFleet(t *testing.T) {
	t.Parallel()
	created := time.Now().Add(-time.Hour)
	var scopes []fleet.Scope
	records := func(rows ...fleet.Record) *fakeFleet {
		return &fakeFleet{list: func(s fleet.Scope) ([]fleet.Record, error) { scopes = append(scopes, s); return rows, nil }}
	}
	kube := records(fleet.Record{Backend: fleet.BackendKubeRay, Namespace: "ml", Name: "raystep-train-1", ClusterKind: fleet.KindStep,
		Kind: "train", Deployment: "Running", JobStatus: "RUNNING", Created: created})
	mine := records(fleet.Record{Backend: fleet.BackendLocal, Name: "alice-dev", ClusterKind: fleet.KindInteractive,
		Kind: fleet.KindInteractive, Deployment: "ready", Created: created})

	code, out, errOut := runFleets(t, []fleet.Fleet{kube, &fakeFleet{}, mine}, "ls", "-o", "json")
	var rows []fleet.Record
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("ls -o json: exit %d, %v: %s%s", code, err, out, errOut)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Backend+" "+r.Name)
	}
	if diff := cmp.Diff([]string{"kuberay raystep-train-1", "local alice-dev"}, got); diff != "" {
		t.Errorf("ls -o json rows (-want +got):\n%s", diff)
	}

	scopes = nil
	if code, out, errOut := runFleets(t, []fleet.Fleet{kube, mine}, "ls", "-n", "ml"); code != 0 ||
		!strings.Contains(out, "raystep-train-1") || !strings.HasPrefix(out, "NAME ") {
		t.Errorf("ls -n ml: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := runFleets(t, []fleet.Fleet{kube, mine}, "ls", "-A"); code != 0 {
		t.Errorf("ls -A: exit %d: %s", code, errOut)
	}
	want := []fleet.Scope{{Namespace: "ml"}, {Namespace: "ml"}, {All: true}, {All: true}}
	if diff := cmp.Diff(want, scopes); diff != "" {
		t.Errorf("scopes the fleets were asked for (-want +got):\n%s", diff)
	}

	broken := &fakeFleet{list: func(fleet.Scope) ([]fleet.Record, error) {
		return nil, errors.New("list raystep RayJobs in namespace ml: connection refused")
	}}
	code, out, errOut = runFleets(t, []fleet.Fleet{broken, mine}, "ls")
	if code != exitInfrastructure || out != "" || !strings.Contains(errOut, "connection refused") {
		t.Errorf("ls with a failing backend: exit %d, stdout %q, stderr %q; want 3, nothing, the reason", code, out, errOut)
	}
	code, _, errOut = runFleets(t, []fleet.Fleet{kube, mine}, "ls", "-A", "-n", "ml")
	if code != exitUsage || !strings.Contains(errOut, "-A and --namespace exclude each other") {
		t.Errorf("ls -A -n ml: exit %d, %q; want 2", code, errOut)
	}
}

// TestGCAsksEveryFleet: gc collects in every backend with the flags'
// options and prints each one's lines; a backend that fails does not
// keep the next from collecting, and gc then fails (exit 3) naming why.
func TestGCAsksEveryFleet(t *testing.T) {
	t.Parallel()
	var opts []fleet.GCOptions
	collector := func(line string, err error) *fakeFleet {
		return &fakeFleet{gc: func(_ fleet.Scope, o fleet.GCOptions, tell func(string)) error {
			opts = append(opts, o)
			tell(line)
			return err
		}}
	}
	kube := collector("would delete RayJob ml/raystep-train-1: heartbeat stopped 10m0s ago", nil)
	mine := collector("would stop local cluster alice-dev: expired 1m0s ago", nil)
	code, out, errOut := runFleets(t, []fleet.Fleet{kube, &fakeFleet{}, mine}, "gc", "--dry-run", "--older-than", "24h", "--heartbeat-grace", "2m")
	want := "would delete RayJob ml/raystep-train-1: heartbeat stopped 10m0s ago\nwould stop local cluster alice-dev: expired 1m0s ago\n"
	if code != 0 || out != want {
		t.Errorf("gc --dry-run: exit %d, %q (%s); want 0, %q", code, out, errOut, want)
	}
	for _, o := range opts {
		if !o.DryRun || o.OlderThan != 24*time.Hour || o.HeartbeatGrace != 2*time.Minute || o.Now.IsZero() {
			t.Errorf("gc options %+v, want the flags' and the time", o)
		}
	}

	failing := collector("deleted RayJob ml/raystep-train-1: heartbeat stopped 10m0s ago", fmt.Errorf("delete RayCluster ml/dev: forbidden"))
	code, out, errOut = runFleets(t, []fleet.Fleet{failing, mine}, "gc")
	if code != exitInfrastructure || !strings.Contains(out, "local cluster alice-dev") || !strings.Contains(errOut, "forbidden") {
		t.Errorf("gc with a failing backend: exit %d, %q, %q; want 3, the other backend's line, the reason", code, out, errOut)
	}
	for _, args := range [][]string{{"gc", "--older-than", "-1h"}, {"gc", "--heartbeat-grace", "0s"}, {"gc", "-A", "-n", "ml"}} {
		if code, _, errOut := runFleets(t, []fleet.Fleet{kube, mine}, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}
