package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// resolveTimeout bounds asking Ray for the dashboard of a GCS address.
const resolveTimeout = time.Minute

// probeTimeout bounds the first request to an existing cluster's dashboard.
const probeTimeout = 10 * time.Second

// ResolveDashboard returns the Ray dashboard URL of an existing cluster,
// the way Ray's own job CLI finds it:
//
//   - explicit (RAYSTEP_DASHBOARD_URL, RAY_API_SERVER_ADDRESS) is used as is;
//   - an http:// or https:// address (RAY_ADDRESS=http://head:8265) is the
//     dashboard itself;
//   - a ray:// (Ray Client) address is refused: raystep talks to the Jobs API;
//   - any other address (host:port of the GCS, or "auto") is resolved by
//     Ray's Python, which reads the dashboard's address from the GCS. This
//     costs about a second; pass the http URL to skip it.
func ResolveDashboard(ctx context.Context, explicit, address, rayBin string) (string, error) {
	if explicit != "" {
		return checkURL(explicit, "dashboard URL")
	}
	switch {
	case address == "":
		return "", errors.New("no RAY_ADDRESS or dashboard URL to reach the cluster")
	case strings.HasPrefix(address, "http://"), strings.HasPrefix(address, "https://"):
		return checkURL(address, "RAY_ADDRESS")
	case strings.Contains(address, "://"):
		return "", fmt.Errorf("RAY_ADDRESS=%s: raystep submits through the Ray Jobs API: "+
			"set RAY_ADDRESS to the dashboard URL, e.g. http://HEAD:8265, or a GCS address HEAD:6379", address)
	}
	u, err := askRay(ctx, address, rayBin)
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

// askRay runs the Python that ray runs on to resolve address.
func askRay(ctx context.Context, address, rayBin string) (string, error) {
	bin, err := FindRay(rayBin)
	if err != nil {
		return "", err
	}
	python := interpreter(bin)
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", resolveScript, address)
	cmd.Env = append(headEnv(bin, nil), "RAY_ADDRESS="+address)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", python, err, lastLine(stderr.String()))
	}
	return lastLine(string(out)), nil
}

// interpreter returns the Python named by the ray script's #! line, else
// the python next to it.
func interpreter(rayBin string) string {
	f, err := os.Open(rayBin)
	if err == nil {
		defer f.Close()
		buf := make([]byte, 512)
		n, _ := f.Read(buf)
		if line, _, _ := bytes.Cut(buf[:n], []byte("\n")); bytes.HasPrefix(line, []byte("#!")) {
			if fields := strings.Fields(string(line[2:])); len(fields) == 1 && filepath.IsAbs(fields[0]) {
				return fields[0]
			}
		}
	}
	return filepath.Join(filepath.Dir(rayBin), "python")
}

// lastLine returns s's last non-empty line, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// probe checks once that the dashboard at base answers GET /api/version,
// so an address that leads nowhere fails at once with a plain message
// instead of after the Jobs client's retries.
func probe(ctx context.Context, base, token string) error {
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
		return fmt.Errorf("%s does not answer (is the cluster running?): %w", base, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s refused the request (%s): set RAYSTEP_DASHBOARD_TOKEN", base, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s/api/version: %s: is it a Ray dashboard?", base, resp.Status)
	}
	return nil
}
