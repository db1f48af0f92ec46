package main

import (
	"context"
	"fmt"

	"github.com/sethvargo/go-envconfig"
)

// config is everything raystep reads from RAYSTEP_* environment variables.
// Flags override it; the platform profile fills in what neither sets.
type config struct {
	// Profile is the platform profile file; empty means the built-in one.
	Profile string `env:"RAYSTEP_PROFILE"`
	// Backend is local or kuberay.
	Backend string `env:"RAYSTEP_BACKEND, default=local"`
	// Namespace overrides the spec's and profile's namespace.
	Namespace string `env:"RAYSTEP_NAMESPACE"`
	// RayBin is the ray executable the local backend starts.
	RayBin string `env:"RAYSTEP_RAY_BIN, default=ray"`
	// DashboardURL reaches an existing Ray dashboard instead of discovering one.
	DashboardURL string `env:"RAYSTEP_DASHBOARD_URL"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"RAYSTEP_LOG_LEVEL, default=info"`
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
