package schemas

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the expected error files in testdata/invalid")

// exampleProfiles are the profiles every example must pass.
func exampleProfiles(t testing.TB) map[string]*Profile {
	t.Helper()
	def, err := DefaultProfile()
	if err != nil {
		t.Fatalf("DefaultProfile: %v", err)
	}
	platform, err := LoadProfile("../examples/platform.yaml")
	if err != nil {
		t.Fatalf("LoadProfile: %v", err)
	}
	return map[string]*Profile{"builtin": def, "platform": platform}
}

func TestExamplesAreValid(t *testing.T) {
	t.Parallel()
	specs := exampleSpecs(t)
	if len(specs) < 3 {
		t.Fatalf("found %d example specs, want at least 3", len(specs))
	}
	for _, file := range specs {
		for name, p := range exampleProfiles(t) {
			t.Run(filepath.Base(file)+"/"+name, func(t *testing.T) {
				t.Parallel()
				if _, err := Load(file, LoadOptions{Profile: p}); err != nil {
					t.Errorf("Load(%s) = %v", file, err)
				}
			})
		}
	}
}

// exampleSpecs finds every job spec (a YAML file of kind RayStep) under
// examples/, however deep.
func exampleSpecs(t *testing.T) []string {
	t.Helper()
	var specs []string
	err := filepath.WalkDir("../examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if regexp.MustCompile(`(?m)^kind:\s*RayStep\s*$`).Match(data) {
			specs = append(specs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

func TestInvalidFixtures(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/invalid/*.*")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, ".errors") {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			_, err := Load(file, LoadOptions{})
			var ve *ValidationErrors
			if !errors.As(err, &ve) {
				t.Fatalf("Load(%s) = %v, want *ValidationErrors", file, err)
			}
			got := ve.Error() + "\n"
			golden := strings.TrimSuffix(file, filepath.Ext(file)) + ".errors"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read %s (run go test -update): %v", golden, err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("errors for %s (-want +got):\n%s", file, diff)
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	src := `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: tiny, owner: me}
spec:
  kind: eval
  entrypoint: python x.py
  workingDir: .
  cluster:
    rayVersion: "2.60.0"
    image: rayproject/ray:2.60.0
    workers:
      - {name: cpu, cpus: 1, memory: 1Gi}
      - {name: auto, minReplicas: 0, maxReplicas: 3, cpus: 1, memory: 1Gi}
      - {name: gpu, gpuType: l4, cpus: 1, memory: 1Gi}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "spec.yaml")
	spec, err := Parse(file, []byte(src), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Namespace, WorkingDir, Teardown, HeadCPU, HeadMemory string
		Provision, Run, TTL                                  time.Duration
		Workers                                              [][4]int32
	}
	got := summary{
		Namespace: spec.Metadata.Namespace, WorkingDir: spec.Spec.WorkingDir, Teardown: string(spec.Spec.Teardown),
		HeadCPU: spec.Spec.Cluster.Head.CPUs.String(), HeadMemory: spec.Spec.Cluster.Head.Memory.String(),
		Provision: spec.Spec.Timeouts.Provision, Run: spec.Spec.Timeouts.Run, TTL: spec.Spec.Timeouts.TTLAfterFinished,
	}
	for _, w := range spec.Spec.Cluster.Workers {
		got.Workers = append(got.Workers, [4]int32{w.Replicas, w.MinReplicas, w.MaxReplicas, w.GPUsPerWorker})
	}
	want := summary{
		// The built-in profile leaves the namespace to the kubeconfig's.
		Namespace: "", WorkingDir: dir, Teardown: "always", HeadCPU: "2", HeadMemory: "4Gi",
		Provision: 15 * time.Minute, Run: 24 * time.Hour, TTL: 10 * time.Minute,
		Workers: [][4]int32{{1, 1, 1, 0}, {0, 0, 3, 0}, {1, 1, 1, 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load("testdata/nope.yaml", LoadOptions{})
	want := "testdata/nope.yaml: cannot read the file: it does not exist"
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v, want %q", err, want)
	}
}

func TestErrorPositions(t *testing.T) {
	t.Parallel()
	_, err := Load("testdata/invalid/three_mistakes.yaml", LoadOptions{})
	var ve *ValidationErrors
	if !errors.As(err, &ve) {
		t.Fatalf("Load = %v", err)
	}
	var got [][2]int
	for _, e := range ve.Errors {
		got = append(got, [2]int{e.Line, e.Column})
	}
	want := [][2]int{{4, 3}, {15, 9}, {19, 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("positions (-want +got):\n%s", diff)
	}
}

func BenchmarkValidate(b *testing.B) {
	data, err := os.ReadFile("../examples/ads_ranking/train.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p, err := DefaultProfile()
	if err != nil {
		b.Fatal(err)
	}
	file := "../examples/ads_ranking/train.yaml"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(file, data, LoadOptions{Profile: p}); err != nil {
			b.Fatal(err)
		}
	}
}

// A spec the shell hands over as a pipe (`-f <(envsubst < spec.yaml)`,
// which raystep sees as /dev/fd/63) has no directory of its own: its
// relative workingDir is relative to the current directory, as for stdin.
func TestWorkingDirOfASpecReadFromAPipe(t *testing.T) {
	cwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "job"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	fifo := filepath.Join(t.TempDir(), "spec.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	src := `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: piped, owner: me}
spec:
  kind: eval
  entrypoint: python x.py
  workingDir: job
  cluster: {rayVersion: "2.60.0", image: rayproject/ray:2.60.0}
`
	wrote := make(chan error, 1)
	go func() { wrote <- os.WriteFile(fifo, []byte(src), 0o600) }()
	spec, err := Load(fifo, LoadOptions{})
	if werr := <-wrote; werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatalf("Load(%s): %v", fifo, err)
	}
	if want := filepath.Join(cwd, "job"); spec.Spec.WorkingDir != want {
		t.Errorf("workingDir = %s, want %s: relative to the current directory", spec.Spec.WorkingDir, want)
	}

	// A directory that is not there is named as the one looked in.
	go func() { wrote <- os.WriteFile(fifo, []byte(strings.Replace(src, "job", "gone", 1)), 0o600) }()
	_, err = Load(fifo, LoadOptions{})
	if werr := <-wrote; werr != nil {
		t.Fatal(werr)
	}
	want := fifo + `: /spec/workingDir: "gone" (relative to the current directory) does not exist`
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v, want %q", err, want)
	}

	// -f /dev/stdin < spec.yaml: a regular file behind one of the
	// process's descriptors, named by the descriptor, is read as stdin is.
	file := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byDescriptor := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	spec, err = Load(byDescriptor, LoadOptions{})
	if err != nil {
		t.Fatalf("Load(%s): %v", byDescriptor, err)
	}
	if want := filepath.Join(cwd, "job"); spec.Spec.WorkingDir != want {
		t.Errorf("workingDir of %s = %s, want %s", byDescriptor, spec.Spec.WorkingDir, want)
	}
}

func TestDescriptorName(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]bool{
		"/dev/stdin": true, "/dev/fd/63": true, "/dev/fd/../fd/0": true, "/proc/self/fd/3": true, "/proc/4242/fd/0": true,
		"/dev/stdinx": false, "/dev/null": false, "/proc/cpuinfo": false, "spec.yaml": false, "dev/fd/3": false,
		"/home/me/fd/spec.yaml": false,
	} {
		if got := descriptorName(file); got != want {
			t.Errorf("descriptorName(%q) = %v, want %v", file, got, want)
		}
	}
}
