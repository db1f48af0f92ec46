package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/raystep/raystep/rayhead"
)

// gcsDialTimeout bounds the check that something listens at a GCS address.
const gcsDialTimeout = 5 * time.Second

// resolveTimeout bounds asking Ray for the dashboard of a GCS address that
// accepted a connection.
const resolveTimeout = 30 * time.Second

// probeTimeout bounds the first request to an existing cluster's dashboard.
const probeTimeout = 10 * time.Second

// CheckAddress refuses, before anything starts, an existing cluster's
// address that raystep cannot use: a dashboard URL (explicit) that is not
// http(s), a RAY_ADDRESS (address) with a scheme other than http(s), such
// as a Ray Client ray:// address, or one that is neither a URL, "auto" nor
// a GCS HOST:PORT. Empty values pass.
func CheckAddress(explicit, address string) error {
	if explicit != "" {
		_, err := checkURL(explicit, "dashboard URL")
		return err
	}
	switch {
	case strings.HasPrefix(address, "http://"), strings.HasPrefix(address, "https://"):
		_, err := checkURL(address, "RAY_ADDRESS")
		return err
	case strings.Contains(address, "://"):
		return fmt.Errorf("RAY_ADDRESS=%s: raystep submits through the Ray Jobs API: "+
			"set RAY_ADDRESS to the dashboard URL, e.g. http://HEAD:8265, or a GCS address HEAD:6379", address)
	case address == "" || address == "auto":
		return nil
	}
	host, port, err := net.SplitHostPort(address)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return fmt.Errorf("RAY_ADDRESS=%s: want the dashboard URL, e.g. http://HEAD:8265, a GCS address HEAD:6379, "+
			"or auto (the cluster `ray start` last started on this machine)", address)
	}
	return nil
}

// ResolveDashboard returns the Ray dashboard URL of an existing cluster,
// the way Ray's own job CLI finds it:
//
//   - explicit (RAYSTEP_DASHBOARD_URL, RAY_API_SERVER_ADDRESS) is used as is;
//   - an http:// or https:// address (RAY_ADDRESS=http://head:8265) is the
//     dashboard itself;
//   - a ray:// (Ray Client) address is refused (CheckAddress);
//   - any other address (host:port of the GCS, or "auto") is resolved by
//     Ray's Python, which reads the dashboard's address from the GCS, with
//     token, when set, as the token Ray's client sends. This costs about a
//     second; pass the http URL to skip it.
func ResolveDashboard(ctx context.Context, explicit, address, rayBin, token string) (string, error) {
	if err := CheckAddress(explicit, address); err != nil {
		return "", err
	}
	switch {
	case explicit != "":
		return checkURL(explicit, "dashboard URL")
	case address == "":
		return "", errors.New("no RAY_ADDRESS or dashboard URL to reach the cluster")
	case strings.HasPrefix(address, "http://"), strings.HasPrefix(address, "https://"):
		return checkURL(address, "RAY_ADDRESS")
	}
	u, err := askRay(ctx, address, rayBin, token, resolveTimeout)
	if err != nil {
		return "", fmt.Errorf("find the dashboard of RAY_ADDRESS=%s (set RAY_ADDRESS=http://HEAD:DASHBOARD_PORT "+
			"or RAYSTEP_DASHBOARD_URL to skip this): %w", address, err)
	}
	return checkURL(u, "dashboard URL from the GCS")
}

// checkURL returns s without a trailing slash when it is an absolute
// http(s) URL.
func checkURL(s, what string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s %q: want http://host:port or https://host[:port][/path]", what, s)
	}
	return strings.TrimRight(s, "/"), nil
}

// resolveScript prints the dashboard URL Ray's job CLI would use for an address.
const resolveScript = `import sys
from ray.dashboard.utils import ray_address_to_api_server_url
print(ray_address_to_api_server_url(sys.argv[1]))
`

// errGCSRefused is askRay's error when the GCS refused the token, or its
// absence.
var errGCSRefused = errors.New("the GCS refused the request (Ray token authentication)")

// askRay runs the Python that ray runs on to resolve address, for at most
// within. A host:port that nothing listens on fails at once, without
// starting Python; Ray's traceback is cut to its last sentence. Ray that
// did not answer in time is quoted: it keeps trying a GCS it cannot reach
// (one that is not Ray, or the address "auto" found) for longer than
// within, and its warnings name the address it tried.
func askRay(ctx context.Context, address, rayBin, token string, within time.Duration) (string, error) {
	host, _, err := net.SplitHostPort(address)
	if err == nil {
		conn, err := (&net.Dialer{Timeout: gcsDialTimeout}).DialContext(ctx, "tcp", address)
		if err != nil {
			return "", fmt.Errorf("no Ray GCS answers at %s: %w", address, unwrapOp(err))
		}
		_ = conn.Close()
	}
	bin, err := rayhead.FindRay(rayBin)
	if err != nil {
		return "", err
	}
	python := rayhead.Interpreter(bin)
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", resolveScript, address)
	// A loopback address stays loopback (rayhead.Env); a token is sent
	// by Ray's client only in token mode.
	extra := []string{"RAY_ADDRESS=" + address}
	if token != "" {
		extra = append(extra, "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN="+token)
	}
	cmd.Env = rayhead.Env(bin, host, extra...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	switch {
	case ctx.Err() != nil:
		if said := rayLastWord(stderr.String()); said != "" {
			return "", fmt.Errorf("ray did not answer within %s (its last word: %q): %w", within, said, context.Cause(ctx))
		}
		return "", fmt.Errorf("ray did not answer within %s: %w", within, context.Cause(ctx))
	case err != nil && strings.Contains(stderr.String(), "AuthenticationError"):
		return "", errGCSRefused
	case err != nil:
		return "", fmt.Errorf("ray says: %s", rayError(stderr.String()))
	}
	return lastLine(string(out)), nil
}

// rayError turns a Python traceback into its last line without the
// exception's module path ("ray.exceptions.RpcError: Timed out" becomes
// "RpcError: Timed out").
func rayError(stderr string) string {
	line := lastLine(stderr)
	if name, msg, ok := strings.Cut(line, ": "); ok && !strings.Contains(name, " ") {
		return name[strings.LastIndex(name, ".")+1:] + ": " + msg
	}
	return line
}

// rayLastWord returns the message of the last line Ray wrote, without the
// prefix of its C++ log lines ("[2026-12-07 02:54:20,217 W 14903 14903]
// rpc_client.h:153: "), or "" when it wrote nothing.
func rayLastWord(stderr string) string {
	line := lastLine(stderr)
	if rest, ok := strings.CutPrefix(line, "["); ok {
		if _, msg, ok := strings.Cut(rest, "] "); ok {
			line = msg
			if src, msg, ok := strings.Cut(line, ": "); ok && !strings.Contains(src, " ") {
				line = msg
			}
		}
	}
	return line
}

// unwrapOp drops the request ("Get URL: ") in front of a network error, so
// the message names the address once.
func unwrapOp(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// lastLine returns s's last non-empty line, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// probe checks once that the dashboard at base answers GET /api/version,
// so an address that leads nowhere fails at once with a plain message
// instead of after the Jobs client's retries. from says where token came
// from, for the message when the dashboard refuses it.
func probe(ctx context.Context, base, token, from string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/version", nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s does not answer (is the cluster running?): %w", base, unwrapOp(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s refused raystep's request (%s): %s", base, resp.Status, tokenAdvice(token, from))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s/api/version: %s: is it a Ray dashboard?", base, resp.Status)
	}
	return nil
}

// tokenAdvice tells what to set when a dashboard refused raystep's token,
// or the lack of one.
func tokenAdvice(token, from string) string {
	if token == "" {
		return "the cluster wants a token and none was found: set RAYSTEP_DASHBOARD_TOKEN or RAY_AUTH_TOKEN " +
			"to the cluster's token, or RAY_AUTH_TOKEN_PATH to a file holding it"
	}
	return "the token from " + from + " is not the cluster's: set RAYSTEP_DASHBOARD_TOKEN to the cluster's token"
}
