//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// maxRSS is the most memory raystep may use to refuse any spec.
const maxRSS = 256 << 20

// specHead starts a spec that is valid up to its runtimeEnv, so what follows
// is all that is wrong with it.
const specHead = `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: hostile, owner: me}
spec:
  kind: train
  entrypoint: python x.py
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
  runtimeEnv:
`

// aliasBomb nests levels lists of nine aliases to the level below.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString(specHead + "    config:\n      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "      l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), ", "))
	}
	return b.String()
}

// manyEnvVars writes a spec of n environment variables to file, without
// holding it in memory: this process's peak RSS counts in its children's.
func manyEnvVars(t *testing.T, file string, n int) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString(specHead + "    env_vars:\n")
	for i := range n {
		fmt.Fprintf(w, "      V%d: \"value-%d\"\n", i, i)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// buildMaxRSS compiles testdata/maxrss, which measures a command's own
// peak RSS.
func buildMaxRSS(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "maxrss")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/maxrss").CombinedOutput()
	if err != nil {
		t.Fatalf("go build maxrss: %v\n%s", err, out)
	}
	return bin
}

// TestValidateHostileSpecs runs the built binary on specs made to hurt it:
// each is refused with exit 2 and one line that names the file and says
// what is wrong, in little memory. go test -v prints wall time and peak
// RSS of each.
func TestValidateHostileSpecs(t *testing.T) {
	t.Parallel()
	bin, maxrss := raystepBin, buildMaxRSS(t)
	rssFile := filepath.Join(t.TempDir(), "rss")
	elf, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	aliasMsg := ": /spec/runtimeEnv/config/l4/4/8/6/5/4: line 14: alias *l3 repeats so much that the spec holds more than 50000 values; " +
		"raystep reads at most 50000 (each use of an alias counts its whole value again)\n"
	tests := []struct {
		name, spec string
		envVars    int // instead of spec, a spec of this many env vars
		stdin      bool
		want       string // stderr after the file name
	}{
		{name: "alias bomb 7 levels", spec: aliasBomb(7), want: aliasMsg},
		{name: "alias bomb 9 levels", spec: aliasBomb(9), want: aliasMsg},
		{name: "alias bomb 9 levels on stdin", spec: aliasBomb(9), stdin: true, want: aliasMsg},
		{name: "1.6 M env vars (47 MiB)", envVars: 1_600_000, want: ": is 46.7 MiB; raystep reads at most 128 KiB\n"},
		{name: "3 MiB on stdin", envVars: 100_000, stdin: true, want: ": is larger than 128 KiB, the most raystep reads\n"},
		{
			name: "60,000 values", spec: specHead + "    config: {x: [" + strings.Repeat("1,", 60_000) + "]}\n",
			want: ": /spec/runtimeEnv/config/x/49985: the spec holds more than 50000 values; raystep reads at most 50000\n",
		},
		{
			name: "10,000 deep", spec: specHead + "    config: {x: " + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + "}\n",
			want: ": line 9: the spec nests deeper than 32 levels; raystep reads at most 32\n",
		},
		{
			name: "5,000 deep", spec: specHead + "    config: {x: " + strings.Repeat("[", 5_000) + strings.Repeat("]", 5_000) + "}\n",
			want: ": /spec/runtimeEnv/config/x" + strings.Repeat("/0", 28) + ": the spec nests deeper than 32 levels; raystep reads at most 32\n",
		},
		{
			name: "NUL byte in the file", spec: specHead + "    env_vars: {A: \"x\x00y\"}\n",
			want: ": is a binary file, not a YAML or JSON spec (it contains NUL bytes)\n",
		},
		{
			name: "NUL escape in an env var", spec: specHead + "    env_vars: {A: \"x\\0y\"}\n",
			want: ": /spec/runtimeEnv/env_vars/A: contains the control character U+0000, which Ray and Kubernetes do not accept\n",
		},
		{
			name: "escape in the entrypoint", spec: strings.Replace(specHead, "python x.py", `"python\ex.py"`, 1) + "    {}\n",
			want: ": /spec/entrypoint: contains the control character U+001B, which Ray and Kubernetes do not accept\n",
		},
		{
			name: "Latin-1", spec: strings.Replace(specHead, "python x.py", "python caf\xe9.py", 1) + "    {}\n",
			want: ": line 6, column 25: byte 0xE9 is not UTF-8 text; this is a binary file or another encoding (save the spec as UTF-8)\n",
		},
		{
			name: "PNG", spec: "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde",
			want: ": is a binary file, not a YAML or JSON spec (it contains NUL bytes)\n",
		},
		{
			name: "70,000-byte entrypoint", spec: strings.Replace(specHead, "python x.py", "python "+strings.Repeat("x", 70_000), 1) + "    {}\n",
			want: ": /spec/entrypoint: is 68 KiB; at most 64 KiB (Ray runs it as one `sh -c` argument): put the commands in a script in workingDir\n",
		},
		{name: "ELF", spec: string(elf), want: ": is a binary file, not a YAML or JSON spec (it contains NUL bytes)\n"},
		{
			name: "8 aliases of 60,000 '<'",
			spec: specHead + "    env_vars:\n      V0: &big " + strings.Repeat("<", 60_000) + "\n" +
				"      V1: *big\n      V2: *big\n      V3: *big\n      V4: *big\n      V5: *big\n      V6: *big\n      V7: *big\n",
			want: ": /spec/runtimeEnv/env_vars: the spec is 2.7 MiB as JSON, most of it here; it travels to the Kubernetes API server " +
				"inside the RayJob, so it may be at most 512 KiB\n",
		},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-32s %10s %10s %8s\n", "spec", "size", "wall", "max RSS")
	for _, tt := range tests {
		file := filepath.Join(t.TempDir(), "hostile.yaml")
		if tt.envVars > 0 {
			manyEnvVars(t, file, tt.envVars)
		} else if err := os.WriteFile(file, []byte(tt.spec), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(maxrss, rssFile, bin, "validate", "-f", file)
		name := file
		if tt.stdin {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd, name = exec.Command(maxrss, rssFile, bin, "validate", "-f", "-"), "<stdin>"
			cmd.Stdin = f
		}
		cmd.Env = childEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err = cmd.Run()
		wall := time.Since(start)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
			t.Errorf("%s: exit %v, want %d; stderr:\n%s", tt.name, err, exitUsage, stderr.String())
		}
		if diff := cmp.Diff(name+tt.want, stderr.String()); diff != "" {
			t.Errorf("%s: stderr (-want +got):\n%s", tt.name, diff)
		}
		kib, err := os.ReadFile(rssFile)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		rss, err := strconv.Atoi(strings.TrimSpace(string(kib)))
		if err != nil {
			t.Fatalf("%s: maxrss wrote %q", tt.name, kib)
		}
		rss <<= 10
		if rss >= maxRSS {
			t.Errorf("%s: peak RSS %d MiB, want under %d MiB", tt.name, rss>>20, maxRSS>>20)
		}
		fmt.Fprintf(&table, "%-32s %10d %10s %5d MiB\n", tt.name, st.Size(), wall.Round(time.Millisecond), rss>>20)
	}
	t.Log(table.String())
}

// TestSignalWhileReadingSpec sends SIGINT or SIGTERM to validate, render and
// run blocked reading a spec from a pipe that never closes: each exits at
// once with 130 or 143. go test -v prints how long each took.
func TestSignalWhileReadingSpec(t *testing.T) {
	t.Parallel()
	bin := raystepBin
	for _, command := range []string{"validate", "render", "run"} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(command+"/"+sig.String(), func(t *testing.T) {
				t.Parallel()
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				cmd := exec.Command(bin, command, "-f", "-")
				cmd.Env, cmd.Stdin = childEnv(), r
				var stderr syncBuffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				r.Close()
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					<-done
				})
				if _, err := w.WriteString("apiVersion: raystep.dev/v1alpha1\n"); err != nil {
					t.Fatal(err)
				}
				waitDrained(t, w, done)
				start := time.Now()
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-done:
					done <- err
					want := 128 + int(sig)
					var ee *exec.ExitError
					if !errors.As(err, &ee) || ee.ExitCode() != want {
						t.Errorf("exit %v, want %d; stderr:\n%s", err, want, stderr.String())
					}
					t.Logf("%s exited %s after %s", command, time.Since(start).Round(time.Millisecond), sig)
				case <-time.After(time.Minute):
					t.Fatalf("%s did not exit within a minute of %s; stderr:\n%s", command, sig, stderr.String())
				}
			})
		}
	}
}

// waitDrained waits until the reader of the pipe w has read all that was
// written to it, which means raystep is reading its spec.
func waitDrained(t *testing.T, w *os.File, done chan error) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(time.Minute)
	for {
		var n int32
		const fionread = 0x541B // Linux ioctl: bytes waiting in a pipe
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, w.Fd(), fionread, uintptr(unsafe.Pointer(&n))); errno != 0 {
			t.Fatalf("ioctl FIONREAD: %v", errno)
		}
		if n == 0 {
			return
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("raystep exited before reading its spec: %v", err)
		case <-timeout:
			t.Fatal("raystep did not read its spec within a minute")
		case <-tick.C:
		}
	}
}

// TestRunHostileSpecStartsNothing checks that specs which used to pass
// validate and fail late (at create, or with a job PENDING for ever) stop
// `run` with exit 2 before ray is ever run.
func TestRunHostileSpecStartsNothing(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, spec, want string }{
		{
			name: "NUL in an env var", spec: specHead + "    env_vars: {A: \"x\\0y\"}\n",
			want: "/spec/runtimeEnv/env_vars/A: contains the control character U+0000",
		},
		{
			name: "10,000 deep", spec: specHead + "    config: {x: " + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + "}\n",
			want: "line 9: the spec nests deeper than 32 levels",
		},
		{
			name: "over 3 MiB", spec: specHead + "    env_vars:\n      V: x\n" +
				"      W: " + strings.Repeat("w", 3<<20) + "\n",
			want: "is 3.0 MiB; raystep reads at most 128 KiB",
		},
		{
			name: "RayJob too large for the API server",
			spec: specHead + "    env_vars:\n      V0: &big " + strings.Repeat("<", 60_000) + "\n" +
				"      V1: *big\n      V2: *big\n      V3: *big\n      V4: *big\n      V5: *big\n      V6: *big\n      V7: *big\n",
			want: "/spec/runtimeEnv/env_vars: the spec is 2.7 MiB as JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "hostile.yaml")
			if err := os.WriteFile(file, []byte(tt.spec), 0o644); err != nil {
				t.Fatal(err)
			}
			bin, invocations := rayWrapper(t)
			// RAY_ADDRESS points at nothing, so that were the spec let
			// through, run would fail with exit 3 and start no head.
			env := map[string]string{"RAYSTEP_RAY_BIN": bin, "RAY_ADDRESS": "http://127.0.0.1:1"}
			code, _, stderr := runRay(t, env, "run", "-f", file)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.HasPrefix(stderr, file+": ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr = %q, want %q after the file name", stderr, tt.want)
			}
			if _, err := os.Stat(invocations); !os.IsNotExist(err) {
				t.Errorf("ray was run for a refused spec (stat %s: %v)", invocations, err)
			}
		})
	}
}
