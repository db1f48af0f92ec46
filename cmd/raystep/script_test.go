package main

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScript runs the CLI acceptance scripts in testdata/script: each
// .txtar file holds a script and the files it uses, and compares what
// raystep prints byte for byte. The raystep command in a script is this
// test binary running main, so run(ctx, args, stdin, stdout, stderr)
// (see TestMain). A script sees only the environment testscript and
// setupScript give it: HOME is an empty directory of its own, and no
// RAYSTEP_*, KUBECONFIG or Ray variable of the user's reaches it. Run
// with -testwork to keep the scripts' directories, -update to rewrite the
// files a failing cmp compares against.
func TestScript(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:           filepath.Join("testdata", "script"),
		Setup:         setupScript,
		Cmds:          map[string]func(*testscript.TestScript, bool, []string){"exits": cmdExits, "binfile": cmdBinfile},
		UpdateScripts: *updateScripts,
	})
}

// updateScripts rewrites the scripts' golden files from what raystep printed.
var updateScripts = flag.Bool("update", false, "rewrite testdata/script files that a cmp compares against")

// setupScript gives every script a HOME of its own, so that neither a
// kubeconfig nor a Ray token of the user's is found, and SCHEMAS, the
// directory of the schema documents raystep embeds.
func setupScript(env *testscript.Env) error {
	schemas, err := filepath.Abs(filepath.Join("..", "..", "schemas"))
	if err != nil {
		return err
	}
	env.Setenv("SCHEMAS", schemas)
	home := filepath.Join(env.WorkDir, ".home")
	env.Setenv("HOME", home)
	return os.Mkdir(home, 0o700)
}

// cmdExits is the script command "exits CODE PROGRAM [ARGS...]": it runs
// PROGRAM as exec does, keeps its stdout and stderr for the commands that
// follow, and fails unless PROGRAM exits with CODE.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: code %q: %v", args[0], err)
	}
	got := 0
	var ee *exec.ExitError
	switch err := ts.Exec(args[1], args[2:]...); {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// cmdBinfile is the script command "binfile FILE": it writes a small
// file that holds NUL bytes, which a .txtar archive cannot carry as text.
func cmdBinfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: binfile FILE")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00"), 0o644))
}
