package main

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
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
	// UIURL is where raystep ui serves, for the History link in a step's
	// Dagster metadata (run's --ui-url).
	UIURL string `env:"RAYSTEP_UI_URL"`
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
	// find a cluster's token; see local.TokenSources.
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
		return nil, &usageError{envError(err, lookup)}
	}
	if err := checkNamespace(c.Namespace); err != nil {
		return nil, &usageError{fmt.Errorf("RAYSTEP_NAMESPACE=%s: %w", c.Namespace, err)}
	}
	for _, f := range envFields(reflect.ValueOf(&c).Elem(), "") {
		d, ok := f.value.Interface().(time.Duration)
		switch {
		case !ok:
		case d < 0:
			return nil, &usageError{fmt.Errorf("%s=%s: expected a duration that is not negative %s", f.env, lookupValue(lookup, f.env), durationExamples)}
		case d == 0 && positive(f.defaultValue):
			// Zero would silently mean the default to the code that reads it.
			return nil, &usageError{fmt.Errorf("%s=%s: expected a duration above zero %s; unset it for the default, %s", f.env, lookupValue(lookup, f.env), durationExamples, f.defaultValue)}
		}
	}
	return &c, nil
}

// durationExamples ends the errors about a RAYSTEP_* duration.
const durationExamples = "(e.g. 90s, 15m, 24h)"

// positive is whether the duration s, a field's default, is above zero.
func positive(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d > 0
}

// envField is one field of config that an environment variable sets.
type envField struct {
	path         string // envconfig's name for it in errors: "Kube: PortForwardGiveUp"
	env          string
	defaultValue string // the tag's default=, "" if none
	value        reflect.Value
}

// envFields lists the fields of the struct v that environment variables
// set, nested structs included.
func envFields(v reflect.Value, prefix string) []envField {
	var fields []envField
	for i := range v.NumField() {
		sf, fv := v.Type().Field(i), v.Field(i)
		tag, ok := sf.Tag.Lookup("env")
		switch {
		case ok:
			name, opts, _ := strings.Cut(tag, ",")
			var def string
			for opt := range strings.SplitSeq(opts, ",") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(opt), "default="); ok {
					def = v
				}
			}
			fields = append(fields, envField{path: prefix + sf.Name, env: name, defaultValue: def, value: fv})
		case sf.Type.Kind() == reflect.Struct:
			fields = append(fields, envFields(fv, prefix+sf.Name+": ")...)
		}
	}
	return fields
}

// envError words envconfig's error, which names a Go field, by the
// environment variable a person set: RAYSTEP_PORT_FORWARD_GIVE_UP="x" is
// not a duration, rather than Kube: PortForwardGiveUp: time: invalid
// duration "x".
func envError(err error, lookup envconfig.Lookuper) error {
	msg := err.Error()
	for _, f := range envFields(reflect.ValueOf(&config{}).Elem(), "") {
		rest, ok := strings.CutPrefix(msg, f.path+": ")
		if !ok {
			continue
		}
		value := lookupValue(lookup, f.env)
		switch f.value.Interface().(type) {
		case time.Duration:
			return fmt.Errorf("%s=%s: expected a duration %s", f.env, value, durationExamples)
		case bool:
			return fmt.Errorf("%s=%s: expected true or false", f.env, value)
		}
		return fmt.Errorf("%s=%s: %s", f.env, value, rest)
	}
	return fmt.Errorf("read RAYSTEP_* environment: %w", err)
}

// lookupValue is the value of the environment variable name, quoted so
// that control characters cannot reach the terminal.
func lookupValue(lookup envconfig.Lookuper, name string) string {
	v, _ := lookup.Lookup(name)
	return strconv.Quote(v)
}
