package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raystep/raystep/fleet"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		name string
		addr string
		auth Auth
		want error
	}{
		{"loopback", "127.0.0.1:0", Auth{}, nil},
		{"localhost", "localhost:8080", Auth{}, nil},
		{"ipv6 loopback", "[::1]:8080", Auth{}, nil},
		{"every interface", "0.0.0.0:8080", Auth{}, ErrExposed},
		{"empty host", ":8080", Auth{}, ErrExposed},
		{"every interface with a token", "0.0.0.0:8080", Auth{Token: "t"}, nil},
		{"every interface behind an untrusted header", "0.0.0.0:8080", Auth{ProxyHeader: "X-Forwarded-User"}, ErrUntrustedHeader},
		{"every interface behind a proxy and a token", "0.0.0.0:8080", Auth{ProxyHeader: "X-Forwarded-User", Token: "t"}, nil},
		{"loopback behind a proxy", "127.0.0.1:8080", Auth{ProxyHeader: "X-Forwarded-User"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckAddr(tt.addr, tt.auth); !errors.Is(err, tt.want) {
				t.Errorf("CheckAddr(%q) = %v, want %v", tt.addr, err, tt.want)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	store := &Store{}
	store.Put(&Record{Record: fleet.Record{Namespace: "ml", Name: "job-1", ClusterKind: "step", Created: time.Now()}})
	srv := httptest.NewServer((&Server{Store: store, Auth: Auth{Token: plantedToken}}).Handler())
	defer srv.Close()
	for _, path := range []string{"/", "/api/clusters", "/events", "/static/app.js"} {
		get(t, srv.URL+path, "", http.StatusUnauthorized)
		get(t, srv.URL+path, "wrong", http.StatusUnauthorized)
	}
	body := get(t, srv.URL+"/api/clusters", plantedToken, http.StatusOK)
	if !strings.Contains(body, "job-1") {
		t.Errorf("/api/clusters with the token = %s, want job-1", body)
	}

	// ?token= once sets a cookie and redirects to the URL without it.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(srv.URL + "/?owner=x&token=" + plantedToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || strings.Contains(loc, "token") {
		t.Fatalf("?token= answered %s to %q, want 303 to a URL without the token", resp.Status, loc)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly {
		t.Fatalf("?token= set cookies %v, want one HttpOnly cookie", cookies)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.AddCookie(cookies[0])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET / with the cookie: %s", resp.Status)
	}
	for k, want := range map[string]string{
		"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}

func TestProxyHeader(t *testing.T) {
	srv := httptest.NewServer((&Server{Store: &Store{}, Auth: Auth{ProxyHeader: "X-Forwarded-User"}}).Handler())
	defer srv.Close()
	get(t, srv.URL+"/", "", http.StatusUnauthorized)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Header.Set("X-Forwarded-User", "erin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET / through the proxy: %s", resp.Status)
	}
}

// BenchmarkRender1000 renders the page of 1,000 clusters.
func BenchmarkRender1000(b *testing.B) {
	store := &Store{}
	now := time.Now()
	for i := range 1000 {
		exp := now.Add(time.Hour)
		store.Put(&Record{Record: fleet.Record{Namespace: fmt.Sprintf("team-%d", i%10), Name: fmt.Sprintf("cluster-%04d", i),
			ClusterKind: "step", Kind: "train", Owner: "owner", GPUs: "a100-80gb=8,l4=2", Deployment: "Running",
			JobStatus: "RUNNING", Created: now.Add(-time.Hour), RunID: "run", Dashboard: "http://head:8265", Expires: &exp, Asset: "a/b"}})
	}
	s := &Server{Store: store}
	var sb strings.Builder
	for b.Loop() {
		sb.Reset()
		if err := s.render(&sb, Filter{}); err != nil {
			b.Fatal(err)
		}
	}
}
