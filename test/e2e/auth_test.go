package e2e

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stable replaces what changes from run to run in raystep's console
// output: elapsed times and the step id.
func stable(s string) string {
	s = regexp.MustCompile(`\[ *[0-9.]+s\]`).ReplaceAllString(s, "[T]")
	return regexp.MustCompile(`raystep-ads-ranking-train-[0-9a-f]{12}`).ReplaceAllString(s, "STEP")
}

// TestRunOnTokenCluster runs steps on an existing head with Ray's token
// authentication: the token is found where Ray's own tools find it, and a
// wrong or missing one fails at once with one line that says what to set.
func TestRunOnTokenCluster(t *testing.T) {
	h := tokenRay.Head(t)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ray"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, ".ray", "auth_token")
	if err := os.WriteFile(file, []byte(h.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := h.DashboardURL()
	refused := "[T] provision  step STEP (train) on local\n" +
		"[T] failed     provision: provision local cluster STEP: " + url + " refused raystep's request "
	tests := []struct {
		name     string
		env      map[string]string
		wantCode int
		wantErr  string
	}{
		{name: "token in ~/.ray/auth_token, GCS address", env: map[string]string{"RAY_ADDRESS": h.Address(), "HOME": home}},
		{name: "token file in RAY_AUTH_TOKEN_PATH", env: map[string]string{"RAY_ADDRESS": url, "RAY_AUTH_TOKEN_PATH": file}},
		{
			name:     "wrong RAYSTEP_DASHBOARD_TOKEN wins over RAY_AUTH_TOKEN",
			env:      map[string]string{"RAY_ADDRESS": url, "RAYSTEP_DASHBOARD_TOKEN": "wrong", "RAY_AUTH_TOKEN": h.Token()},
			wantCode: exitInfrastructure,
			wantErr: refused + "(403 Forbidden): the token from RAYSTEP_DASHBOARD_TOKEN is not the cluster's: " +
				"set RAYSTEP_DASHBOARD_TOKEN to the cluster's token\n",
		},
		{
			name: "no token", env: map[string]string{"RAY_ADDRESS": url, "HOME": t.TempDir()}, wantCode: exitInfrastructure,
			wantErr: refused + "(401 Unauthorized): the cluster wants a token and none was found: " +
				"set RAYSTEP_DASHBOARD_TOKEN or RAY_AUTH_TOKEN to the cluster's token, or RAY_AUTH_TOKEN_PATH to a file holding it\n",
		},
		{
			name: "no token, GCS address", env: map[string]string{"RAY_ADDRESS": h.Address(), "HOME": t.TempDir()}, wantCode: exitInfrastructure,
			wantErr: "[T] provision  step STEP (train) on local\n" +
				"[T] failed     provision: provision local cluster STEP: the GCS at " + h.Address() + " refused raystep's request: " +
				"the cluster wants a token and none was found: " +
				"set RAYSTEP_DASHBOARD_TOKEN or RAY_AUTH_TOKEN to the cluster's token, or RAY_AUTH_TOKEN_PATH to a file holding it\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runRay(t, tt.env, "run", "-f", train, "--set", `spec.entrypoint=python -c "print('trained')"`)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstderr:\n%s\nstdout:\n%s", code, tt.wantCode, stderr, stdout)
			}
			if tt.wantCode == 0 {
				if !strings.Contains(stdout, "trained") {
					t.Errorf("stdout lacks the driver's output:\n%s", stdout)
				}
				return
			}
			if diff := cmp.Diff(tt.wantErr, stable(stderr)); diff != "" {
				t.Errorf("stderr (-want +got):\n%s\n%s", diff, stderr)
			}
		})
	}
}

// closedPort returns a loopback address that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestRunAddressThatNobodyAnswers points RAY_ADDRESS at nothing in each of
// its forms: nothing is called ready, each fails within seconds with one
// line, and a Ray Client address is a usage error before anything starts.
func TestRunAddressThatNobodyAnswers(t *testing.T) {
	addr := closedPort(t)
	tests := []struct {
		name, address string
		wantCode      int
		wantErr       string
	}{
		{
			name: "dashboard URL", address: "http://" + addr, wantCode: exitInfrastructure,
			wantErr: "[T] provision  step STEP (train) on local\n" +
				"[T] failed     provision: provision local cluster STEP: http://" + addr +
				" does not answer (is the cluster running?): dial tcp " + addr + ": connect: connection refused\n",
		},
		{
			name: "GCS address", address: addr, wantCode: exitInfrastructure,
			wantErr: "[T] provision  step STEP (train) on local\n" +
				"[T] failed     provision: provision local cluster STEP: find the dashboard of RAY_ADDRESS=" + addr +
				" (set RAY_ADDRESS=http://HEAD:DASHBOARD_PORT or RAYSTEP_DASHBOARD_URL to skip this): " +
				"no Ray GCS answers at " + addr + ": dial tcp " + addr + ": connect: connection refused\n",
		},
		{
			name: "Ray Client address", address: "ray://" + addr, wantCode: exitUsage,
			wantErr: "raystep: RAY_ADDRESS=ray://" + addr + ": raystep submits through the Ray Jobs API: " +
				"set RAY_ADDRESS to the dashboard URL, e.g. http://HEAD:8265, or a GCS address HEAD:6379\n" +
				"Run 'raystep run --help' for usage.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, _, stderr := runRay(t, map[string]string{"RAY_ADDRESS": tt.address}, "run", "-f", train)
			took := time.Since(start)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", code, tt.wantCode, stderr)
			}
			if diff := cmp.Diff(tt.wantErr, stable(stderr)); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if took > 10*time.Second {
				t.Errorf("took %s, want it to fail within 10s", took)
			}
		})
	}
}
