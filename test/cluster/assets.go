package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
)

const (
	// buildScript is the script, relative to the module root, that builds the
	// component binaries and prints their directory.
	buildScript = "test/k8s/build.sh"
	// operatorModule is the KubeRay module whose CRDs and reconcilers run.
	operatorModule = "github.com/ray-project/kuberay/ray-operator"
	// operatorFallbackVersion is used when the binary carries no module info.
	operatorFallbackVersion = "v1.6.0"
)

// binaries are the executables the assets directory must hold in bin/.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// resolveAssets returns the assets directory: dir if set, else the output of
// the build script found above the working directory (which only prints the
// directory when the binaries are already built).
func resolveAssets(ctx context.Context, dir string, kueue bool) (string, error) {
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(root, buildScript))
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("run %s: %w: %s", buildScript, err, lastLines(stderr.String(), 20))
		}
		dir = strings.TrimSpace(stdout.String())
	}
	need := binaries
	if kueue {
		need = append(need[:len(need):len(need)], "kueue")
	}
	for _, b := range need {
		if _, err := os.Stat(filepath.Join(dir, "bin", b)); err != nil {
			return "", fmt.Errorf("assets %s: %w (build them with %s)", dir, err, buildScript)
		}
	}
	return dir, nil
}

// moduleRoot walks up from the working directory to the directory holding
// the build script.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, buildScript)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find module root: no %s above the working directory; set Options.AssetsDir", buildScript)
		}
		dir = parent
	}
}

// operatorVersion is the version of the KubeRay module linked into this
// binary, so the CRDs installed always match the reconcilers that run.
func operatorVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == operatorModule {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return operatorFallbackVersion
}

// crdDir returns the KubeRay CRD directory inside the module cache,
// downloading the module through the Go module proxy if needed.
func crdDir(ctx context.Context) (string, error) {
	mod := operatorModule + "@" + operatorVersion()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s", mod, err, stderr.String())
	}
	var out struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	if out.Error != "" || out.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", mod, out.Error)
	}
	dir := filepath.Join(out.Dir, "config", "crd", "bases")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("kuberay CRDs: %w", err)
	}
	return dir, nil
}

// wrapDeathSignal writes an executable script into dir that runs bin so that
// it is killed when the process that started it dies. envtest starts etcd and
// the API server itself; without this a test binary killed by its timeout
// would leave them running.
func wrapDeathSignal(dir, bin string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return bin, nil // Stop and t.Cleanup still stop it.
		}
		return "", fmt.Errorf("look up setpriv: %w", err)
	}
	path := filepath.Join(dir, filepath.Base(bin))
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", shellQuote(setpriv), shellQuote(bin))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("write %s wrapper: %w", filepath.Base(bin), err)
	}
	return path, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
