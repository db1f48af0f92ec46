package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/test/raytest"
)

// warningLine matches what raystep prints when it warns a person: a phase
// tag marked "!" or a WARN log line.
var warningLine = regexp.MustCompile(`^\[ *[0-9.]+s\] \S+ !|\bWARN`)

// TestExamplesWarnAboutNothing runs the built binary the way `make demo`
// does (from the repository root, with the virtualenv's ray) on the train
// example, on the default private head, and then on the eval example, on
// a running head (the session's, RAY_ADDRESS): both succeed and raystep
// prints no warning of its own.
func TestExamplesWarnAboutNothing(t *testing.T) {
	bin := raystepBin
	model := filepath.Join(t.TempDir(), "model")
	for _, spec := range []string{"train.yaml", "eval.yaml"} { // eval reads the model train writes
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // only catches a hang
		cmd := exec.CommandContext(ctx, bin, "run", "-f", filepath.Join("examples", "ads_ranking", spec),
			"--set", "spec.runtimeEnv.env_vars.ADS_MODEL_DIR="+model)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = childEnv("NO_COLOR=1")
		if os.Getenv("RAYSTEP_RAY_BIN") != "" { // the suite's counting ray, in front of the virtualenv's
			cmd.Env = append(cmd.Env, "RAYSTEP_RAY_BIN="+raytest.RayBin(t))
		}
		if spec == "eval.yaml" {
			cmd.Env = append(cmd.Env, "RAY_ADDRESS="+ray.Head(t).DashboardURL())
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\nstderr:\n%s\nstdout:\n%s", spec, err, stderr.String(), stdout.String())
		}
		for _, line := range strings.Split(stderr.String(), "\n") {
			if warningLine.MatchString(line) {
				t.Errorf("%s: raystep warned: %q", spec, line)
			}
		}
		if !strings.Contains(stderr.String(), " done ") {
			t.Errorf("%s: no done line on stderr:\n%s", spec, stderr.String())
		}
	}
}
