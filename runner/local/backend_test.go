package local_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/local"
	"github.com/raystep/raystep/schemas"
	"github.com/raystep/raystep/test/raytest"
)

// rayHead is the session's shared head (test/raytest), for the tests that
// use a head someone else runs; the others start private heads because
// their subject is that head's start, end or death. Those run in
// parallel: their heads' starts take turns (rayhead.StartSlots), and each
// test's waits (an expiry, a SIGKILLed supervisor) overlap the others'.
var rayHead raytest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	rayHead.Stop()
	os.Exit(code)
}

func TestResolveDashboard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, explicit, address string
		want                    string
		wantErr                 bool
	}{
		{name: "explicit wins", explicit: "https://ray.example.com/c1/", address: "10.0.0.1:6379", want: "https://ray.example.com/c1"},
		{name: "http address", address: "http://127.0.0.1:8265", want: "http://127.0.0.1:8265"},
		{name: "ray client address", address: "ray://127.0.0.1:10001", wantErr: true},
		{name: "bad explicit", explicit: "127.0.0.1:8265", wantErr: true},
		{name: "nothing", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := local.ResolveDashboard(context.Background(), tt.explicit, tt.address, "", "")
			if (err != nil) != tt.wantErr {
				t.Fatalf("ResolveDashboard error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ResolveDashboard (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExistingClusterFromGCSAddress resolves a head's GCS address (the
// session's shared head) to its dashboard through Ray's own Python, and
// leaves the head running.
func TestExistingClusterFromGCSAddress(t *testing.T) {
	t.Parallel()
	h := rayHead.Head(t)
	b := &local.Backend{Address: h.Address(), Head: rayhead.Options{RayBin: raytest.RayBin(t)}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := b.Provision(ctx, runner.Step{ID: "raystep-x-0123456789ab"}, runner.Discard)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	d, err := c.Dashboard(ctx)
	if err != nil {
		t.Fatalf("Dashboard: %v", err)
	}
	if diff := cmp.Diff(runner.Dashboard{URL: h.DashboardURL()}, d); diff != "" {
		t.Errorf("Dashboard (-want +got):\n%s", diff)
	}
	if err := c.Teardown(ctx, false); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	resp, err := http.Get(h.DashboardURL() + "/api/version")
	if err != nil {
		t.Fatalf("the existing head no longer answers after Teardown: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the existing head answers %s after Teardown, want 200 OK", resp.Status)
	}
}

// checkTornDownEvenWhenKept checks that a healthy private cluster c
// reported no failure, and that Teardown stops every process of its head
// although keep is true.
func checkTornDownEvenWhenKept(ctx context.Context, t *testing.T, c runner.Cluster) {
	t.Helper()
	select {
	case err := <-c.Failures():
		t.Fatalf("a healthy head reported a failure: %v", err)
	default:
	}
	// Ray's processes name the GCS by the node's address, maybe not
	// 127.0.0.1, but always with its port.
	port := c.Name()[strings.LastIndex(c.Name(), ":"):]
	pids := processesMentioning(t, port)
	if len(pids) == 0 {
		t.Fatalf("no process mentions the head's GCS port %s", port)
	}
	if err := c.Teardown(ctx, true); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if left := processesMentioning(t, port); len(left) > 0 {
		t.Errorf("ray processes %v (of %v) still run after Teardown", left, pids)
	}
}

// processesMentioning returns the pids whose command line contains s.
func processesMentioning(t *testing.T, s string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestExistingClusterProbe checks the first request to an existing
// cluster's dashboard: an answer, a refusal, something else, nothing.
func TestExistingClusterProbe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		closed  bool
		wantErr string
	}{
		{name: "ray answers", status: http.StatusOK},
		{name: "token refused", status: http.StatusForbidden, wantErr: "(403 Forbidden): the token from RAY_AUTH_TOKEN is not the cluster's: set RAYSTEP_DASHBOARD_TOKEN"},
		{name: "not a dashboard", status: http.StatusNotFound, wantErr: "is it a Ray dashboard?"},
		{name: "nobody there", closed: true, wantErr: "does not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			auth := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case auth <- r.Header.Get("Authorization"):
				default:
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			if tt.closed {
				srv.Close()
			}
			b := &local.Backend{DashboardURL: srv.URL, Token: "t0k", TokenFrom: "RAY_AUTH_TOKEN"}
			c, err := b.Provision(context.Background(), runner.Step{}, runner.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Provision error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, err := c.Dashboard(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := runner.Dashboard{URL: srv.URL, Token: "t0k"}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("Dashboard (-want +got):\n%s", diff)
			}
			if got := <-auth; got != "Bearer t0k" {
				t.Errorf("Authorization = %q, want the bearer token", got)
			}
		})
	}
}

// TestCheckAddress: RAY_ADDRESS is a dashboard URL, a GCS HOST:PORT or
// auto; anything else is refused with what it should be.
func TestCheckAddress(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "auto", "10.0.0.1:6379", "head.example.com:6379", "[::1]:6379", "http://127.0.0.1:8265"} {
		if err := local.CheckAddress("", ok); err != nil {
			t.Errorf("CheckAddress(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"notaurl:::", "10.0.0.1", "10.0.0.1:99999", "10.0.0.1:0", ":6379", "head:gcs"} {
		if err := local.CheckAddress("", bad); err == nil || !strings.Contains(err.Error(), "RAY_ADDRESS="+bad+": want the dashboard URL") {
			t.Errorf("CheckAddress(%q) = %v, want it refused, saying what to set", bad, err)
		}
	}
}

// TestPlaceOnRayAddress: a RAY_ADDRESS that is not an address is the
// user's mistake, refused before anything starts (exit 2); RAY_ADDRESS=local,
// Ray's word for a new Ray on this machine, gets the step a private head
// and says so, instead of the cluster some other ray start left running.
func TestPlaceOnRayAddress(t *testing.T) {
	t.Parallel()
	site := func(address string) *local.Site {
		dir := t.TempDir()
		return &local.Site{
			Address:  address,
			RayBin:   func() (string, error) { return "ray", nil },
			StateDir: func() (string, error) { return dir, nil },
			Open:     func() (*local.Clusters, error) { return &local.Clusters{Dir: dir}, nil },
		}
	}
	spec := &schemas.Spec{}
	_, _, err := site("notaurl:::").Place(t.Context(), runner.Step{}, fleet.Placement{Spec: spec})
	if !errors.Is(err, fleet.ErrUsage) || !strings.Contains(err.Error(), "RAY_ADDRESS=notaurl:::: want the dashboard URL") {
		t.Errorf("RAY_ADDRESS=notaurl:::: %v, want a usage error naming it", err)
	}
	step, b, err := site("local").Place(t.Context(), runner.Step{}, fleet.Placement{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if b.(*local.Backend).Existing() || step.Shape != "private ray head on this machine" ||
		!slices.ContainsFunc(step.Notices, func(n string) bool { return strings.Contains(n, "RAY_ADDRESS=local") }) {
		t.Errorf("RAY_ADDRESS=local: shape %q, notices %q; want a private head, said", step.Shape, step.Notices)
	}
}

// TestPlaceWithSecretEnv: a private head has raystep's own environment, so
// a spec.cluster.secretEnv variable raystep lacks is said before the job
// runs without it, and one it has is not; on an existing cluster, whose
// environment raystep cannot give anything, the step says it is not used.
func TestPlaceWithSecretEnv(t *testing.T) {
	t.Parallel()
	spec := &schemas.Spec{}
	spec.Spec.Cluster.SecretEnv = []schemas.SecretEnv{{Name: "WANDB_API_KEY", Secret: "wandb", Key: "api-key"}, {Name: "HF_TOKEN", Secret: "hf", Key: "token"}}
	site := func(address string, env map[string]string) *local.Site {
		dir := t.TempDir()
		return &local.Site{
			Address:   address,
			RayBin:    func() (string, error) { return "ray", nil },
			StateDir:  func() (string, error) { return dir, nil },
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		}
	}
	for _, tt := range []struct {
		name, address string
		env           map[string]string
		want          string // a notice that contains this; "" for no notice about secretEnv
	}{
		{"private head, one unset", "", map[string]string{"HF_TOKEN": "hf-value-1c9"}, "spec.cluster.secretEnv: WANDB_API_KEY not set in raystep's environment"},
		{"private head, both set", "", map[string]string{"HF_TOKEN": "hf-value-1c9", "WANDB_API_KEY": "wandb-value-7f2"}, ""},
		{"existing cluster", "http://127.0.0.1:8265", map[string]string{"HF_TOKEN": "hf-value-1c9", "WANDB_API_KEY": "wandb-value-7f2"}, "spec.cluster.secretEnv (WANDB_API_KEY, HF_TOKEN) is not used on an existing cluster"},
	} {
		step, _, err := site(tt.address, tt.env).Place(t.Context(), runner.Step{}, fleet.Placement{Spec: spec})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got string
		for _, n := range step.Notices {
			if strings.Contains(n, "secretEnv") {
				got = n
			}
		}
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: notice %q, want one with %q", tt.name, got, tt.want)
		}
		for _, v := range tt.env {
			if strings.Contains(strings.Join(step.Notices, "\n"), v) {
				t.Errorf("%s: a notice carries the value of a secret variable: %q", tt.name, step.Notices)
			}
		}
	}
}
