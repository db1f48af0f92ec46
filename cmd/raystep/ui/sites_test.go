package ui

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/fleet"
)

// request sends a GET of path to srv with the Host and headers given
// (a "Host" key sets the Host header) and returns the status code.
func request(t *testing.T, srv *httptest.Server, path string, headers map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode
}

// TestForeignHostAndOrigin: the UI on loopback, with no login, answers
// its own names and pages only. A name rebound to 127.0.0.1 (DNS
// rebinding) gets 421 on every route; a page of another origin gets 403
// whether it reads JSON, opens an event stream or a WebSocket; the UI's
// own pages, curl and a link followed from elsewhere get in.
func TestForeignHostAndOrigin(t *testing.T) {
	store := &Store{}
	store.Put(&Record{Record: fleet.Record{Namespace: "ml", Name: "job-1", ClusterKind: "step", Created: time.Now()}})
	srv := httptest.NewServer((&Server{Store: store}).Handler())
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	self := "http://127.0.0.1:" + port
	websocket := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	with := func(base map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for bk, bv := range base {
			out[bk] = bv
		}
		return out
	}
	paths := []string{"/", "/api/clusters", "/events", "/static/app.js", "/clusters/ml/job-1/", "/clusters/ml/job-1/events",
		"/clusters/ml/job-1/jobs/x/events", "/clusters/ml/job-1/dashboard/api/jobs/"}
	for _, path := range paths {
		for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "127.0.0.1.attacker.example:" + port} {
			if code := request(t, srv, path, map[string]string{"Host": host}); code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %s: %d, want 421", path, host, code)
			}
		}
		for _, origin := range []string{"https://evil.example", "null", "http://localhost:" + port, "http://127.0.0.1:1"} {
			if code := request(t, srv, path, map[string]string{"Origin": origin}); code != http.StatusForbidden {
				t.Errorf("GET %s from a page of %s: %d, want 403", path, origin, code)
			}
			if code := request(t, srv, path, with(websocket, "Origin", origin)); code != http.StatusForbidden {
				t.Errorf("WebSocket %s from a page of %s: %d, want 403", path, origin, code)
			}
		}
		for _, site := range []string{"cross-site", "same-site"} {
			h := map[string]string{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"}
			if code := request(t, srv, path, h); code != http.StatusForbidden {
				t.Errorf("GET %s as a %s script: %d, want 403", path, site, code)
			}
		}
	}
	for name, h := range map[string]map[string]string{
		"curl":                  {},
		"localhost":             {"Host": "localhost:" + port},
		"LOCALHOST.":            {"Host": "LOCALHOST.:" + port},
		"the UI's own page":     {"Origin": self, "Sec-Fetch-Site": "same-origin"},
		"a link from elsewhere": {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
		"typed in the bar":      {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"},
	} {
		if code := request(t, srv, "/api/clusters", h); code != http.StatusOK {
			t.Errorf("GET /api/clusters by %s (%v): %d, want 200", name, h, code)
		}
	}
	// A link from elsewhere shows the page, but a frame of it is not a navigation it may make.
	if code := request(t, srv, "/", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
		"Sec-Fetch-Dest": "iframe"}); code != http.StatusForbidden {
		t.Errorf("GET / in another site's frame: %d, want 403", code)
	}
}

// TestPublicURL: behind an Ingress the UI answers the public name, and
// the public origin may read it even when the proxy rewrites Host.
func TestPublicURL(t *testing.T) {
	sites, err := NewSites("0.0.0.0:8080", []string{"https://Raystep.Example.com/", "http://raystep-ui.ml-ads.svc"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&Server{Store: &Store{}, Auth: Auth{Token: plantedToken, Sites: sites}}).Handler())
	defer srv.Close()
	bearer := "Bearer " + plantedToken
	for name, h := range map[string]map[string]string{
		"the public name":         {"Host": "raystep.example.com", "Origin": "https://raystep.example.com"},
		"the service name":        {"Host": "raystep-ui.ml-ads.svc"},
		"a proxy that sets Host":  {"Host": "raystep-ui.ml-ads.svc", "Origin": "https://raystep.example.com"},
		"a port-forward":          {"Host": "127.0.0.1:8080"},
		"the machine's host name": {"Host": machineNames()[0] + ":8080"},
	} {
		h["Authorization"] = bearer
		if code := request(t, srv, "/api/clusters", h); code != http.StatusOK {
			t.Errorf("GET /api/clusters by %s (%v): %d, want 200", name, h, code)
		}
	}
	for name, h := range map[string]map[string]string{
		"another name":            {"Host": "raystep.example.com.attacker.example"},
		"the public name on http": {"Host": "raystep-ui.ml-ads.svc", "Origin": "http://raystep.example.com"},
	} {
		h["Authorization"] = bearer
		if code := request(t, srv, "/api/clusters", h); code < 400 {
			t.Errorf("GET /api/clusters by %s (%v): %d, want a refusal", name, h, code)
		}
	}
	for _, bad := range []string{"raystep.example.com", "ftp://x/", "https://user:pw@x/", "https://"} {
		if _, err := NewSites("0.0.0.0:8080", []string{bad}); err == nil || !strings.Contains(err.Error(), "--public-url") {
			t.Errorf("NewSites(--public-url %q) = %v, want an error naming --public-url", bad, err)
		}
	}
}

// TestTrustedProxy: a header-authenticated UI beyond loopback is refused
// at start without a token or trusted proxies, and with them serves only
// requests from the proxy's addresses.
func TestTrustedProxy(t *testing.T) {
	if err := CheckAddr("0.0.0.0:8080", Auth{ProxyHeader: "X-Forwarded-User"}); !errors.Is(err, ErrUntrustedHeader) {
		t.Errorf("CheckAddr with only a proxy header = %v, want ErrUntrustedHeader", err)
	}
	for _, v := range []string{"10.0.0.0/8", "10.1.2.3", "fd00::/8"} {
		p, err := ParseTrustedProxies([]string{v})
		if err != nil {
			t.Fatalf("ParseTrustedProxies(%q): %v", v, err)
		}
		if err := CheckAddr("0.0.0.0:8080", Auth{ProxyHeader: "X-Forwarded-User", TrustedProxies: p}); err != nil {
			t.Errorf("CheckAddr with the header and trusted proxy %s = %v", v, err)
		}
	}
	if _, err := ParseTrustedProxies([]string{"10.0.0.0/33"}); err == nil || !strings.Contains(err.Error(), "--trusted-proxy") {
		t.Errorf("ParseTrustedProxies(10.0.0.0/33) = %v, want an error naming --trusted-proxy", err)
	}
	for _, tt := range []struct {
		trusted string
		want    int
	}{{"10.0.0.0/8", http.StatusForbidden}, {"127.0.0.1/32", http.StatusOK}} {
		auth := Auth{ProxyHeader: "X-Forwarded-User", TrustedProxies: []netip.Prefix{netip.MustParsePrefix(tt.trusted)}}
		srv := httptest.NewServer((&Server{Store: &Store{}, Auth: auth}).Handler())
		if code := request(t, srv, "/api/clusters", map[string]string{"X-Forwarded-User": "anyone"}); code != tt.want {
			t.Errorf("trusted %s, a request from 127.0.0.1 with the header: %d, want %d", tt.trusted, code, tt.want)
		}
		if code := request(t, srv, "/api/clusters", nil); code == http.StatusOK {
			t.Errorf("trusted %s, a request without the header: 200", tt.trusted)
		}
		srv.Close()
	}
}
