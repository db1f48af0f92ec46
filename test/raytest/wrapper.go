package raytest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/raystep/raystep/rayhead"
)

// Wrapper writes a ray executable for one test that logs each invocation
// (its pid and arguments, one line each) to log and then runs RayBin, with
// the directory of ray's interpreter first on PATH so that the driver's
// python is the one Ray runs on. The pid of `ray start` leads the head's
// process group. A log that does not exist means ray was never run.
func Wrapper(t testing.TB) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "ray"), filepath.Join(dir, "invocations")
	real := RayBin(t)
	pyDir := filepath.Dir(rayhead.Interpreter(real))
	script := "#!/bin/sh\necho \"$$ $*\" >> " + log + "\nPATH=" + pyDir + ":$PATH exec " + real + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// raystep runs the head's keeper with a python beside ray.
	if err := os.Symlink(filepath.Join(pyDir, "python3"), filepath.Join(dir, "python3")); err != nil {
		t.Fatal(err)
	}
	return bin, log
}
