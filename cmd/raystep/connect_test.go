package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/raystep/raystep/runner"
)

// TestConnectorUserAgentAndDebugLogs: the Jobs client run builds sends
// User-Agent raystep/<version>, logs its retries only at debug level, and
// takes its outage budget from RAYSTEP_DASHBOARD_OUTAGE.
func TestConnectorUserAgentAndDebugLogs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		level     string
		wantRetry bool
	}{
		{level: "debug", wantRetry: true},
		{level: "info", wantRetry: false},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var agents []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				agents = append(agents, r.UserAgent())
				n := len(agents)
				mu.Unlock()
				if n == 1 {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte(`{"status": "RUNNING"}`))
			}))
			defer srv.Close()
			var stderr syncBuffer
			a := &app{stderr: &stderr, version: "1.2.3-test", lookup: envconfig.MapLookuper(map[string]string{
				"RAYSTEP_LOG_LEVEL": tt.level, "RAYSTEP_DASHBOARD_OUTAGE": "42s",
			})}
			var err error
			if a.cfg, err = loadConfig(t.Context(), a.lookup); err != nil {
				t.Fatal(err)
			}
			if a.log, err = newLogger(a.cfg.LogLevel, a.stderr); err != nil {
				t.Fatal(err)
			}
			conn := a.connector()
			if conn.MaxOutage != 42*time.Second {
				t.Errorf("MaxOutage = %s, want 42s from RAYSTEP_DASHBOARD_OUTAGE", conn.MaxOutage)
			}
			jobs, err := conn.Connect(context.Background(), runner.Dashboard{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := jobs.Get(t.Context(), "job1"); err != nil {
				t.Fatalf("Get: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, ua := range agents {
				if ua != "raystep/1.2.3-test" {
					t.Errorf("User-Agent %q, want raystep/1.2.3-test", ua)
				}
			}
			logs := stderr.String()
			if got := strings.Contains(logs, "DEBUG") && strings.Contains(logs, "retrying request"); got != tt.wantRetry {
				t.Errorf("RAYSTEP_LOG_LEVEL=%s: retry logged at debug = %v, want %v; stderr:\n%s", tt.level, got, tt.wantRetry, logs)
			}
			if strings.Contains(logs, "ERROR") {
				t.Errorf("a retried request logged as an error:\n%s", logs)
			}
		})
	}
}
