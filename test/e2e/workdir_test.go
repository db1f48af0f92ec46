package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// stepSpec writes a spec whose working dir ./wd holds files ("name" ->
// body; "name@" -> target makes a symlink, "name#" -> bytes a sparse file
// of that many MiB) and returns the spec's path.
func stepSpec(t *testing.T, entrypoint, excludes string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, "wd", strings.TrimRight(name, "@#"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "@"):
			err = os.Symlink(body, p)
		case strings.HasSuffix(name, "#"):
			err = os.WriteFile(p, nil, 0o644)
			if err == nil {
				mib := 0
				for _, c := range body {
					mib = mib*10 + int(c-'0')
				}
				err = os.Truncate(p, int64(mib)<<20)
			}
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	spec := `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata:
  name: wd-test
  owner: raystep-tests
spec:
  kind: train
  entrypoint: ` + entrypoint + `
  workingDir: ./wd
  runtimeEnv:
    excludes: ` + excludes + `
  entrypointResources:
    cpus: 0
  cluster:
    rayVersion: "2.60.0"
    image: rayproject/ray:2.60.0-py311-cpu
`
	path := filepath.Join(dir, "step.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestValidateWorkingDir checks that validate refuses a working dir that
// cannot be packaged, with the pointer to fix, exit 2.
func TestValidateWorkingDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		files    map[string]string
		excludes string
		set      string
		wantErr  string // after "FILE: "
	}{
		{name: "fine", files: map[string]string{"main.py": "", "x.log": ""}, excludes: `["*.log"]`},
		{
			name: "filesystem root", files: map[string]string{"main.py": ""}, excludes: "[]", set: "spec.workingDir=/",
			wantErr: "/spec/workingDir: working dir /: is the filesystem root: name the directory that holds the job's code\n",
		},
		{
			name: "editor lock file", files: map[string]string{"main.py": "", ".#main.py@": "me@host.42:1700000000"}, excludes: "[]",
			wantErr: "/spec/workingDir: working dir WD: .#main.py is a dangling symlink (editor lock files are): " +
				"remove it or add it to runtimeEnv.excludes or a .rayignore file\n",
		},
		{name: "editor lock file excluded", files: map[string]string{"main.py": "", ".#main.py@": "x"}, excludes: `[".#*"]`},
		{
			name: "symlink loop", files: map[string]string{"main.py": "", "a@": "b", "b@": "a"}, excludes: "[]",
			wantErr: "/spec/workingDir: working dir WD: a is a symlink that cannot be followed (too many levels of symbolic links): " +
				"remove it or add it to runtimeEnv.excludes or a .rayignore file\n",
		},
		{
			name: "invalid exclude", files: map[string]string{"main.py": ""}, excludes: `["*.log", "data[0-9"]`,
			wantErr: `/spec/runtimeEnv/excludes/1: "data[0-9": not a valid gitignore pattern (an unclosed [ or a trailing \?)` + "\n",
		},
		{
			name: "too big", files: map[string]string{"main.py": "", "data/blob#": "600"}, excludes: "[]",
			wantErr: "/spec/workingDir: working dir WD: package too large for Ray: its files add up to more than 512.0 MiB " +
				"(stopped counting at 600.0 MiB), Ray takes a package under 512.0 MiB: exclude the largest: data/ (600.0 MiB) with runtimeEnv.excludes, .rayignore or .gitignore\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := stepSpec(t, "python main.py", tt.excludes, tt.files)
			args := []string{"validate", "-f", spec}
			if tt.set != "" {
				args = append(args, "--set", tt.set)
			}
			code, stdout, stderr := runRay(t, nil, args...)
			if tt.wantErr == "" {
				if code != 0 || stdout != spec+": ok\n" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and ok", code, stdout, stderr)
				}
				return
			}
			want := spec + ": " + strings.ReplaceAll(tt.wantErr, "WD", filepath.Join(filepath.Dir(spec), "wd"))
			if code != exitUsage || stderr != want {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", code, stderr, exitUsage, want)
			}
		})
	}
}

// TestRunBadWorkingDirStartsNothing checks that run refuses a working dir
// with a dangling symlink before ray is ever run.
func TestRunBadWorkingDirStartsNothing(t *testing.T) {
	t.Parallel()
	bin, invocations := rayWrapper(t)
	spec := stepSpec(t, "python main.py", "[]", map[string]string{"main.py": "", "src/.#x.py@": "gone"})
	code, _, stderr := runRay(t, map[string]string{"RAYSTEP_RAY_BIN": bin}, "run", "-f", spec)
	if code != exitUsage || !strings.Contains(stderr, "/spec/workingDir: working dir ") ||
		!strings.Contains(stderr, "src/.#x.py is a dangling symlink") {
		t.Errorf("exit %d, want %d and the dangling symlink named at /spec/workingDir; stderr:\n%s", code, exitUsage, stderr)
	}
	if _, err := os.Stat(invocations); !os.IsNotExist(err) {
		t.Errorf("ray was run for a bad working dir (stat %s: %v)", invocations, err)
	}
}

// TestRunExcludes runs a step on a real head whose working dir has an
// excluded file, an excluded directory and an included file; the job
// lists its working directory.
func TestRunExcludes(t *testing.T) {
	h := ray.Head(t)
	spec := stepSpec(t, `python -c "import os; print('cwd:', sorted(os.listdir('.')))"`, `["secret.txt", "/data/"]`,
		map[string]string{"main.py": "", "secret.txt": "s3cr3t", "data/big.csv": "1,2", "sub/secret.txt": "", "keep.txt": ""})
	code, stdout, stderr := runRay(t, map[string]string{"RAY_ADDRESS": h.DashboardURL()}, "run", "-f", spec)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstderr:\n%s", code, stderr)
	}
	if want := "cwd: ['keep.txt', 'main.py', 'sub']\n"; !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout)
	}
}

// TestRunSIGTERMWhilePackaging sends SIGTERM to the built binary while it
// zips a 500 MiB working dir (a sparse file, under Ray's limit): raystep
// must exit 143 without finishing the package, upload nothing and leave
// no zip behind. The time from the signal to the exit is logged.
func TestRunSIGTERMWhilePackaging(t *testing.T) {
	t.Parallel()
	bin := raystepBin
	var packageRequests atomic.Int32
	dash := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/version":
			_, _ = w.Write([]byte(`{"ray_version": "2.60.0", "version": "4"}`))
		case strings.HasPrefix(r.URL.Path, "/api/packages/"):
			packageRequests.Add(1)
			http.NotFound(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(dash.Close)
	spec := stepSpec(t, "python main.py", "[]", map[string]string{"main.py": "", "data/big.bin#": "500"})
	tmp := t.TempDir()
	cmd := exec.Command(bin, "run", "-f", spec)
	cmd.Env = childEnv("RAYSTEP_DASHBOARD_URL="+dash.URL, "TMPDIR="+tmp)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done; done <- nil })
	waitPackaging(t, cmd.Process.Pid, tmp, done, &out)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	var err error
	select {
	case err = <-done:
		done <- err
	case <-time.After(time.Minute): // only catches a hang
		t.Fatalf("raystep still running a minute after SIGTERM:\n%s", out.String())
	}
	t.Logf("raystep exited %v after SIGTERM", time.Since(signalled))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitSIGTERM {
		t.Errorf("raystep exited with %v, want exit status %d\n%s", err, exitSIGTERM, out.String())
	}
	if n := packageRequests.Load(); n != 0 {
		t.Errorf("the dashboard got %d package requests: packaging went on after SIGTERM", n)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "raystep-pkg-*")); len(left) != 0 {
		t.Errorf("package files left behind: %v", left)
	}
}

// waitPackaging waits until raystep's zip in dir holds data. The zip has
// no name in dir (nothing of it may outlive raystep), so it is found among
// the open files of raystep's process.
func waitPackaging(t *testing.T, pid int, dir string, done chan error, out *syncBuffer) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	hang := time.After(2 * time.Minute)
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	for {
		entries, _ := os.ReadDir(fds)
		for _, e := range entries {
			link := filepath.Join(fds, e.Name())
			target, err := os.Readlink(link)
			if err != nil || !strings.HasPrefix(target, filepath.Join(dir, "raystep-pkg-")) {
				continue
			}
			if fi, err := os.Stat(link); err == nil && fi.Size() > 0 {
				return
			}
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("raystep exited before it packaged anything: %v\n%s", err, out.String())
		case <-hang:
			t.Fatalf("no package started within 2 minutes:\n%s", out.String())
		case <-tick.C:
		}
	}
}
