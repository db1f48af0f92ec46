package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
)

// TestUsageErrorsBeforeRun checks, for every subcommand, that what cobra
// rejects before the command's own work (an unknown flag, a stray
// argument) is a usage error: exit 2 and the usage line. That holds
// because the one start-up hook is the root's PersistentPreRun, which
// cobra calls only after parsing flags and checking arguments.
func TestUsageErrorsBeforeRun(t *testing.T) {
	t.Parallel()
	a := &app{}
	for _, sub := range a.rootCommand().Commands() {
		name := sub.Name()
		for _, tt := range []struct {
			what string
			args []string
			want string
		}{
			{"unknown flag", []string{name, "--nope"}, "raystep: unknown flag: --nope\n"},
			{"stray arguments", []string{name, "a", "b"}, ""},
		} {
			if tt.what == "stray arguments" && takesNames[name] {
				continue // down's test is the empty list: see testdata/script/up.txtar
			}
			t.Run(name+"/"+tt.what, func(t *testing.T) {
				t.Parallel()
				code, _, stderr := runTest(t, nil, tt.args...)
				if code != exitUsage {
					t.Errorf("%q: exit %d, want %d; stderr:\n%s", tt.args, code, exitUsage, stderr)
				}
				// The usage line names the subcommand whose --help tells its flags.
				usage := "\nRun 'raystep " + name + " --help' for usage.\n"
				if !strings.HasSuffix(stderr, usage) || !strings.HasPrefix(stderr, tt.want) {
					t.Errorf("%q: stderr = %q, want %q and %q", tt.args, stderr, tt.want, usage)
				}
			})
		}
	}
}

// takesNames are the commands whose arguments are names.
var takesNames = map[string]bool{"down": true}

// TestStartupHookIsTheRoots checks that no subcommand has a start-up hook
// of its own: a PersistentPreRun on a subcommand would replace the root's,
// and its errors would no longer count as the command's.
func TestStartupHookIsTheRoots(t *testing.T) {
	t.Parallel()
	a := &app{}
	root := a.rootCommand()
	if root.PersistentPreRun == nil {
		t.Fatal("the root command has no PersistentPreRun")
	}
	for _, sub := range root.Commands() {
		if sub.PersistentPreRun != nil || sub.PersistentPreRunE != nil || sub.PreRun != nil || sub.PreRunE != nil {
			t.Errorf("%s has a start-up hook of its own", sub.Name())
		}
	}
}

// TestCommandErrorsAreNotUsage checks that the hook runs for a command
// that does start its work: ls on the kuberay backend without a
// kubeconfig fails reaching the cluster (exit 3), not as bad usage.
func TestCommandErrorsAreNotUsage(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		lookup: envconfig.MapLookuper(map[string]string{"HOME": t.TempDir(), "RAYSTEP_BACKEND": "kuberay"})}
	code := a.main(context.Background(), []string{"ls"})
	if code != exitInfrastructure || !a.started {
		t.Errorf("ls: exit %d, started %v, want %d and true; stderr:\n%s", code, a.started, exitInfrastructure, errOut.String())
	}
}
