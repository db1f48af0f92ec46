// Package k8s tests build.sh, which builds the Kubernetes test binaries
// that test/cluster runs, or unpacks a prebuilt archive of them.
package k8s

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildSh runs build.sh with args and the cache dir cache; --no-build in
// args keeps it from compiling anything.
func buildSh(t *testing.T, cache string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"build.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "RAYSTEP_K8S_CACHE="+cache, "RAYSTEP_K8S_ARCHIVE=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run build.sh: %v", err)
	}
	return code, out.String(), errOut.String()
}

// key is the cache key build.sh derives from the pinned versions.
func key(t *testing.T) string {
	t.Helper()
	code, out, errOut := buildSh(t, t.TempDir(), "--key")
	k := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(k, "k8s-v") || strings.Contains(k, "/") {
		t.Fatalf("build.sh --key: exit %d, %q, %s", code, out, errOut)
	}
	return k
}

// tree writes a cache directory named key under dir as build.sh makes it
// (stand-in binaries); without crds it lacks kueue-crds/.
func tree(t *testing.T, dir, key string, crds bool) {
	t.Helper()
	root := filepath.Join(dir, key)
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kueue"} {
		write(t, filepath.Join(root, "bin", b), "#!/bin/sh\n", 0o755)
	}
	for _, s := range []string{"node-fast", "node-heartbeat", "node-chaos", "pod-general", "pod-fast", "pod-chaos"} {
		write(t, filepath.Join(root, "stages", s, "stage.yaml"), "kind: Stage\n", 0o644)
	}
	if crds {
		write(t, filepath.Join(root, "kueue-crds", "crd.yaml"), "kind: CustomResourceDefinition\n", 0o644)
	}
	write(t, filepath.Join(root, "VERSIONS"), "test\n", 0o644)
}

func write(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// archive packs dir/key into dir/name with tar --zstd, as the shared
// archives are made, and returns its path.
func archive(t *testing.T, dir, key, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if out, err := exec.Command("tar", "--zstd", "-cf", path, "-C", dir, key).CombinedOutput(); err != nil {
		t.Fatalf("tar --zstd (zstd is a Debian package; .ci/run installs it): %v\n%s", err, out)
	}
	return path
}

func digest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestArchive: build.sh unpacks an archive whose name is its key and whose
// digest SHA256SUMS vouches for, in place of a 39-minute build; every
// other archive is refused with the reason, and nothing of it is left in
// the cache. --no-build makes a refusal fail instead of building.
func TestArchive(t *testing.T) {
	t.Parallel()
	k := key(t)
	tests := []struct {
		name string
		// prepare returns the archive to pass in a fresh dir.
		prepare func(t *testing.T, dir string) string
		want    string // in stderr; "" means the archive is used
	}{
		{"matching", func(t *testing.T, dir string) string {
			tree(t, dir, k, true)
			a := archive(t, dir, k, k+".tar.zst")
			write(t, filepath.Join(dir, "SHA256SUMS"), digest(t, a)+"  "+k+".tar.zst\n", 0o644)
			return a
		}, ""},
		{"another key", func(t *testing.T, dir string) string {
			other := "k8s-v1.0.0-etcd-v3.0.0-kwok-v0.1.0-kueue-v0.1.0"
			tree(t, dir, other, true)
			a := archive(t, dir, other, other+".tar.zst")
			write(t, filepath.Join(dir, "SHA256SUMS"), digest(t, a)+"  "+other+".tar.zst\n", 0o644)
			return a
		}, "it holds k8s-v1.0.0-etcd-v3.0.0-kwok-v0.1.0-kueue-v0.1.0, this checkout needs " + k},
		{"digest differs", func(t *testing.T, dir string) string {
			tree(t, dir, k, true)
			a := archive(t, dir, k, k+".tar.zst")
			write(t, filepath.Join(dir, "SHA256SUMS"), strings.Repeat("0", 64)+"  "+k+".tar.zst\n", 0o644)
			return a
		}, "its SHA-256 is "},
		{"no SHA256SUMS", func(t *testing.T, dir string) string {
			tree(t, dir, k, true)
			return archive(t, dir, k, k+".tar.zst")
		}, "there is no SHA256SUMS beside it"},
		{"no line for it", func(t *testing.T, dir string) string {
			tree(t, dir, k, true)
			a := archive(t, dir, k, k+".tar.zst")
			write(t, filepath.Join(dir, "SHA256SUMS"), digest(t, a)+"  other.tar.zst\n", 0o644)
			return a
		}, " no line for it"},
		{"corrupt", func(t *testing.T, dir string) string {
			tree(t, dir, k, true)
			a := archive(t, dir, k, k+".tar.zst")
			b, err := os.ReadFile(a)
			if err != nil {
				t.Fatal(err)
			}
			write(t, a, string(b[:len(b)/2]), 0o644) // cut short, its digest listed
			write(t, filepath.Join(dir, "SHA256SUMS"), digest(t, a)+"  "+k+".tar.zst\n", 0o644)
			return a
		}, "tar failed"},
		{"incomplete", func(t *testing.T, dir string) string {
			tree(t, dir, k, false)
			a := archive(t, dir, k, k+".tar.zst")
			write(t, filepath.Join(dir, "SHA256SUMS"), digest(t, a)+"  "+k+".tar.zst\n", 0o644)
			return a
		}, "it does not hold a complete " + k + "/"},
		{"missing", func(t *testing.T, dir string) string { return filepath.Join(dir, k+".tar.zst") },
			"there is no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := tt.prepare(t, t.TempDir())
			cache := t.TempDir()
			code, stdout, stderr := buildSh(t, cache, "--archive", a, "--no-build")
			dir := filepath.Join(cache, k)
			if tt.want == "" {
				if code != 0 || strings.TrimSpace(stdout) != dir || !strings.Contains(stderr, "unpacked "+a) {
					t.Fatalf("exit %d, stdout %q, want 0 and %s; stderr:\n%s", code, stdout, dir, stderr)
				}
				if fi, err := os.Stat(filepath.Join(dir, "bin", "kube-apiserver")); err != nil || fi.Mode()&0o111 == 0 {
					t.Errorf("bin/kube-apiserver after unpacking: %v", err)
				}
				// A second run finds it complete and needs no archive.
				if code, stdout, _ := buildSh(t, cache, "--no-build"); code != 0 || strings.TrimSpace(stdout) != dir {
					t.Errorf("second run: exit %d, %q", code, stdout)
				}
				return
			}
			wantErr := "k8s-build: not using " + a + ": "
			if code != 1 || !strings.Contains(stderr, wantErr) || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "not building from source (--no-build)") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q...%q", code, stderr, wantErr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing (it carries the directory only on success)", stdout)
			}
			if left, _ := filepath.Glob(filepath.Join(cache, "[^.]*")); len(left) > 0 {
				t.Errorf("left in the cache: %v", left)
			}
			if left, _ := filepath.Glob(filepath.Join(cache, ".unpack*")); len(left) > 0 {
				t.Errorf("left in the cache: %v", left)
			}
		})
	}
}
