package main

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeBuildIsStatic runs `make build` the way a user does, into a
// temporary BIN, and checks that both binaries are static, as the README
// promises: no ELF interpreter (PT_INTERP, .interp) and no shared library
// (DT_NEEDED), so ldd has no libc to list. The raystep binary must run and
// carry the version make stamped into it.
func TestMakeBuildIsStatic(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "-C", filepath.Join("..", ".."), "build", "BIN="+bin, "VERSION=static-test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	for _, name := range []string{"raystep", "pipes-conformance"} {
		t.Run(name, func(t *testing.T) {
			assertStatic(t, filepath.Join(bin, name))
		})
	}
	out, err := exec.Command(filepath.Join(bin, "raystep"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "raystep static-test (") {
		t.Errorf("raystep version = %q (%v), want it to start with %q", out, err, "raystep static-test (")
	}
}

// assertStatic fails the test unless the ELF file at path is linked
// statically.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a PT_INTERP program header: it needs a dynamic loader", path)
		}
	}
	if f.Section(".interp") != nil {
		t.Errorf("%s has an .interp section", path)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("%s: read DT_NEEDED: %v", path, err)
	}
	if len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v, want none", path, libs)
	}
}
