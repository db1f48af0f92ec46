package raysubmit_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/raystep/raystep/raysubmit"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestAuthHeadersAndRedaction(t *testing.T) {
	const token = "s3cr3t-token-value"
	var mu sync.Mutex
	seen := map[string]http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		if r.URL.Path == "/api/version" {
			_, _ = io.WriteString(w, `{"version":"4","ray_version":"2.60.0"}`)
			return
		}
		http.Error(w, "invalid token "+token, http.StatusUnauthorized)
	}))
	defer srv.Close()
	core, logs := observer.New(zap.DebugLevel)
	c, err := raysubmit.New(raysubmit.Config{
		BaseURL:   srv.URL,
		Token:     token,
		Headers:   http.Header{"X-Team": {"ads"}},
		UserAgent: "raystep/1.2.3",
		Logger:    zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Version(t.Context()); err != nil {
		t.Fatalf("Version: %v", err)
	}
	_, getErr := c.Get(t.Context(), "job1")
	_, followErr := c.Follow(t.Context(), "job1", io.Discard, nil)
	want := map[string]string{
		"Authorization":       "Bearer " + token,
		"X-Ray-Authorization": "Bearer " + token,
		"X-Team":              "ads",
		"User-Agent":          "raystep/1.2.3",
	}
	for _, path := range []string{"/api/version", "/api/jobs/job1", "/api/jobs/job1/logs/tail"} {
		got := map[string]string{}
		for k := range want {
			got[k] = seen[path].Get(k)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s headers (-want +got):\n%s", path, diff)
		}
	}
	var apiErr *raysubmit.APIError
	if !errors.As(getErr, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("Get = %v, want an APIError with 401", getErr)
	}
	for _, err := range []error{getErr, followErr} {
		if err == nil || strings.Contains(err.Error(), token) {
			t.Errorf("error %q: want an error without the token", err)
		}
	}
	for _, e := range logs.All() {
		if strings.Contains(e.Message, token) || strings.Contains(fmtFields(e.ContextMap()), token) {
			t.Errorf("log entry leaks the token: %v %v", e.Message, e.ContextMap())
		}
	}
}

func fmtFields(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(anyString(v), "\n", " "), "\t", " ")))
	}
	return b.String()
}

func anyString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  raysubmit.Config
	}{
		{name: "no scheme", cfg: raysubmit.Config{BaseURL: "127.0.0.1:8265"}},
		{name: "missing CA", cfg: raysubmit.Config{BaseURL: "https://x:8265", CAFile: "/nonexistent/ca.pem"}},
		{name: "password hidden", cfg: raysubmit.Config{BaseURL: "ftp://u:hunter2@x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := raysubmit.New(tt.cfg)
			if err == nil {
				t.Fatal("New: want an error")
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
}

func TestTLSNeedsTrust(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ray_version":"2.60.0"}`)
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeCert(t, srv, caFile)
	tests := []struct {
		name    string
		cfg     raysubmit.Config
		wantErr bool
	}{
		{name: "untrusted", cfg: raysubmit.Config{BaseURL: srv.URL}, wantErr: true},
		{name: "CA file", cfg: raysubmit.Config{BaseURL: srv.URL, CAFile: caFile}},
		{name: "insecure when asked", cfg: raysubmit.Config{BaseURL: srv.URL, InsecureSkipVerify: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := raysubmit.New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c.HTTP.RetryWaitMin, c.HTTP.RetryWaitMax = time.Millisecond, time.Millisecond
			_, err = c.Version(t.Context())
			if (err != nil) != tt.wantErr {
				t.Errorf("Version error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestCheckRetry(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	resp := func(code int, body string) *http.Response {
		return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(body))}
	}
	tests := []struct {
		name string
		ctx  context.Context
		resp *http.Response
		err  error
		want bool
	}{
		{name: "connection refused", ctx: context.Background(), err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}, want: true},
		{name: "cancelled", ctx: cancelled, err: errors.New("boom"), want: false},
		{name: "200", ctx: context.Background(), resp: resp(200, ""), want: false},
		{name: "404", ctx: context.Background(), resp: resp(404, ""), want: false},
		{name: "429", ctx: context.Background(), resp: resp(429, ""), want: true},
		{name: "500 traceback", ctx: context.Background(), resp: resp(500, "Traceback ..."), want: false},
		{name: "500 duplicate", ctx: context.Background(), resp: resp(500, "Please use a different submission_id."), want: false},
		{name: "500 no agent yet", ctx: context.Background(), resp: resp(500, "No available agent to submit job, please try again later."), want: true},
		{name: "500 agent hung up", ctx: context.Background(), resp: resp(500, agentHungUp), want: true},
		{name: "500 agent refused", ctx: context.Background(), resp: resp(500, "Traceback (most recent call last):\naiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 10.0.0.7:52365"), want: true},
		{name: "501", ctx: context.Background(), resp: resp(501, ""), want: false},
		{name: "502", ctx: context.Background(), resp: resp(502, ""), want: true},
		{name: "503", ctx: context.Background(), resp: resp(503, ""), want: true},
		{name: "504", ctx: context.Background(), resp: resp(504, ""), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := raysubmit.CheckRetry(tt.ctx, tt.resp, tt.err)
			if got != tt.want {
				t.Errorf("CheckRetry = %v, want %v", got, tt.want)
			}
			if tt.resp != nil {
				if b, _ := io.ReadAll(tt.resp.Body); tt.resp.StatusCode == 500 && len(b) == 0 {
					t.Error("CheckRetry consumed the body")
				}
			}
		})
	}
}

func TestBuildPackageDeterministic(t *testing.T) {
	files := map[string]string{
		"main.py":           "print('hi')\n",
		"pkg/mod.py":        "X = 1\n",
		"pkg/.gitignore":    "*.log\n",
		"pkg/run.log":       "noise\n",
		".rayignore":        "scratch/\n",
		"scratch/tmp.bin":   "x\n",
		".git/HEAD":         "ref: refs/heads/main\n",
		"excluded/data.csv": "1,2\n",
	}
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chtimes(filepath.Join(b, "main.py"), time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	opts := raysubmit.PackageOptions{Excludes: []string{"excluded"}}
	pa, err := raysubmit.BuildPackage(ctx(t), a, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Remove()
	pb, err := raysubmit.BuildPackage(ctx(t), b, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Remove()
	if pa.Name != pb.Name || !strings.HasPrefix(pa.Name, "_ray_pkg_") {
		t.Errorf("names %s and %s: want the same _ray_pkg_<hash>.zip", pa.Name, pb.Name)
	}
	want := []string{".rayignore", "main.py", "pkg/", "pkg/.gitignore", "pkg/mod.py"}
	if diff := cmp.Diff(want, zipNames(t, pa)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestBuildPackageTooLarge(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "blob"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := raysubmit.BuildPackage(ctx(t), dir, raysubmit.PackageOptions{MaxSize: 64})
	if !errors.Is(err, raysubmit.ErrPackageTooLarge) {
		t.Errorf("BuildPackage = %v, want ErrPackageTooLarge", err)
	}
}

func writeCert(t *testing.T, srv *httptest.Server, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pemEncode(f, srv.Certificate().Raw); err != nil {
		t.Fatal(err)
	}
}

func pemEncode(w io.Writer, der []byte) error {
	return pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestSubmitBodyAndWaitContext(t *testing.T) {
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/jobs/":
			_ = json.NewDecoder(r.Body).Decode(&body)
			_, _ = io.WriteString(w, `{"job_id":"02000000","submission_id":"train-1"}`)
		default:
			_, _ = io.WriteString(w, `{"status":"RUNNING","submission_id":"train-1"}`)
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	resp, err := c.Submit(t.Context(), raysubmit.SubmitRequest{
		Entrypoint:          "python train.py",
		SubmissionID:        "train-1",
		RuntimeEnv:          map[string]any{"env_vars": map[string]any{"A": "1"}},
		Metadata:            map[string]string{"owner": "ads"},
		EntrypointNumCPUs:   1,
		EntrypointNumGPUs:   0.5,
		EntrypointMemory:    2 << 30,
		EntrypointResources: map[string]float64{"accelerator_type:A100": 1},
	})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if diff := cmp.Diff(&raysubmit.SubmitResponse{JobID: "02000000", SubmissionID: "train-1"}, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	want := map[string]any{
		"entrypoint":           "python train.py",
		"submission_id":        "train-1",
		"runtime_env":          map[string]any{"env_vars": map[string]any{"A": "1"}},
		"metadata":             map[string]any{"owner": "ads"},
		"entrypoint_num_cpus":  1.0,
		"entrypoint_num_gpus":  0.5,
		"entrypoint_memory":    float64(2 << 30),
		"entrypoint_resources": map[string]any{"accelerator_type:A100": 1.0},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, "train-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a job that never ends: error = %v, want DeadlineExceeded", err)
	}
}
