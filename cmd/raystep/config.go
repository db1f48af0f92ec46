package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"
)

// config is everything raystep reads from RAYSTEP_* environment variables.
// Flags override it; the platform profile fills in what neither sets.
type config struct {
	// Profile is the platform profile file; empty means the built-in one.
	Profile string `env:"RAYSTEP_PROFILE"`
	// Backend is local or kuberay.
	Backend string `env:"RAYSTEP_BACKEND, default=local"`
	// RunCluster is the run cluster file (see schemas.RunCluster);
	// --run-cluster overrides it.
	RunCluster string `env:"RAYSTEP_RUN_CLUSTER"`
	// Namespace overrides the spec's and profile's namespace.
	Namespace string `env:"RAYSTEP_NAMESPACE"`
	// RayBin is the ray executable the local backend starts; empty means
	// .venv/bin/ray in the working directory or a parent, else ray on PATH.
	RayBin string `env:"RAYSTEP_RAY_BIN"`
	// DashboardURL reaches an existing Ray dashboard instead of discovering
	// one; with the local backend it means "use that cluster".
	DashboardURL string `env:"RAYSTEP_DASHBOARD_URL"`
	// DashboardToken is a bearer token for the dashboard (Ray token auth).
	DashboardToken string `env:"RAYSTEP_DASHBOARD_TOKEN"`
	// RayAuthToken, RayAuthTokenPath and Home are where Ray's own tools
	// find a cluster's token; see clusterToken.
	RayAuthToken     string `env:"RAY_AUTH_TOKEN"`
	RayAuthTokenPath string `env:"RAY_AUTH_TOKEN_PATH"`
	Home             string `env:"HOME"`
	// StateHome is $XDG_STATE_HOME: with Home, where the local backend
	// records interactive clusters (local.StateDir).
	StateHome string `env:"XDG_STATE_HOME"`
	// User is $USER: the owner of an interactive cluster up makes from
	// flags without --owner.
	User string `env:"USER"`
	// RayAddress is Ray's own RAY_ADDRESS: with the local backend, run on
	// that existing cluster (http(s) dashboard URL or GCS host:port).
	RayAddress string `env:"RAY_ADDRESS"`
	// RayAPIServerAddress is Ray's RAY_API_SERVER_ADDRESS, the dashboard
	// URL Ray's job CLI prefers over RAY_ADDRESS.
	RayAPIServerAddress string `env:"RAY_API_SERVER_ADDRESS"`
	// NoColor turns colour off even on a terminal (https://no-color.org).
	NoColor string `env:"NO_COLOR"`
	// LogFormat is how run shows a standalone step's progress on stderr:
	// auto, text, json or logfmt (see eventSink); --log-format overrides it.
	LogFormat string `env:"RAYSTEP_LOG_FORMAT, default=auto"`
	// DashboardOutage is how long run keeps trying a Ray dashboard that
	// stopped answering while it follows the job's log, before the step
	// fails (exit 3).
	DashboardOutage time.Duration `env:"RAYSTEP_DASHBOARD_OUTAGE, default=3m"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"RAYSTEP_LOG_LEVEL, default=info"`
	// Kube is what the KubeRay backend, ls and gc read besides the above.
	Kube kubeConfig
}

// loadConfig reads config through lookup, which tests replace with
// envconfig.MapLookuper.
func loadConfig(ctx context.Context, lookup envconfig.Lookuper) (*config, error) {
	var c config
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &c, Lookuper: lookup}); err != nil {
		return nil, &usageError{fmt.Errorf("read RAYSTEP_* environment: %w", err)}
	}
	return &c, nil
}

// clusterToken returns the token for an existing Ray cluster and where it
// came from: RAYSTEP_DASHBOARD_TOKEN, else what Ray's own tools use, in
// their order: RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names,
// ~/.ray/auth_token (first line, trimmed). Like Ray, it fails when
// RAY_AUTH_TOKEN_PATH names a file that is missing or empty, and finds no
// token when ~/.ray/auth_token is missing.
func (c *config) clusterToken() (token, from string, err error) {
	switch {
	case c.DashboardToken != "":
		return c.DashboardToken, "RAYSTEP_DASHBOARD_TOKEN", nil
	case strings.TrimSpace(c.RayAuthToken) != "":
		return strings.TrimSpace(c.RayAuthToken), "RAY_AUTH_TOKEN", nil
	case c.RayAuthTokenPath != "":
		from = "RAY_AUTH_TOKEN_PATH=" + c.RayAuthTokenPath
		token, err = readToken(c.RayAuthTokenPath)
		if err == nil && token == "" {
			err = errors.New("the file is empty")
		}
		if err != nil {
			return "", "", &usageError{fmt.Errorf("read the ray auth token of %s: %w", from, err)}
		}
		return token, from, nil
	case c.Home != "":
		from = filepath.Join(c.Home, ".ray", "auth_token")
		token, err = readToken(from)
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", nil
		}
		if err != nil {
			return "", "", &usageError{fmt.Errorf("read the ray auth token: %w", err)}
		}
		return token, from, nil
	}
	return "", "", nil
}

// readToken returns the first line of the file at path, trimmed.
func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(first), nil
}
