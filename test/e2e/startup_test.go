package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestInitRunsFirst runs the built binary with GODEBUG=inittrace=1: package
// quickstart, which turns the garbage collector off while packages
// initialize, must be initialized before the packages whose init
// allocates most (the JSON Schema metaschemas, the S3 client's tables, the
// Kubernetes core API's types), or it saves nothing. Go orders ready
// packages by import path, so a rename or a new import of either side
// could silently undo it.
func TestInitRunsFirst(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(raystepBin, "version")
	cmd.Env = childEnv("GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("raystep version: %v\n%s", err, out)
	}
	const us = "github.com/raystep/raystep/internal/quickstart"
	var before, after int // bytes allocated by init before and after ours
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// init PKG @0.9 ms, 0.06 ms clock, 312 bytes, 7 allocs
		f := strings.Fields(line)
		if len(f) < 8 || f[0] != "init" {
			continue
		}
		seen[f[1]] = true
		n, _ := strconv.Atoi(f[6])
		switch {
		case f[1] == us:
		case seen[us]:
			after += n
		default:
			before += n
		}
	}
	if !seen[us] {
		t.Fatalf("no init line of %s in:\n%s", us, out)
	}
	for _, heavy := range []string{"github.com/santhosh-tekuri/jsonschema/v6", "github.com/minio/minio-go/v7/pkg/s3utils", "k8s.io/api/core/v1"} {
		if !seen[heavy] {
			t.Errorf("%s was not initialized at all: the check compares nothing", heavy)
		} else if !initAfter(string(out), us, heavy) {
			t.Errorf("%s is initialized before %s", heavy, us)
		}
	}
	if before*4 > after {
		t.Errorf("packages initialized before %s allocate %d bytes, after it %d: want most after it\n%s", us, before, after, out)
	}
}

// initAfter reports whether trace initializes pkg after first.
func initAfter(trace, first, pkg string) bool {
	i, j := strings.Index(trace, "init "+first+" "), strings.Index(trace, "init "+pkg+" ")
	return i >= 0 && j > i
}
