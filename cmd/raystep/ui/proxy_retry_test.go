package ui

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// dropFirst is a listener that closes the first connection it accepts
// unanswered, as a port-forward does when it cannot open its stream to
// the pod, and hands out the rest.
type dropFirst struct {
	net.Listener
	accepted atomic.Int32
}

func (l *dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.accepted.Add(1) == 1 {
			_ = c.Close()
			continue
		}
		return c, nil
	}
}

func dashboardThatDropsItsFirstConnection(t *testing.T) (*dropFirst, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &dropFirst{Listener: ln}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"ray_version": "2.60.0"}`)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l, "http://" + ln.Addr().String()
}

func TestProxyResendsAGetThatGotNoAnswer(t *testing.T) {
	l, base := dashboardThatDropsItsFirstConnection(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := retryUnanswered{base: &http.Transport{}}.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET through a dropped connection: %v, want the second connection's answer", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "2.60.0") {
		t.Errorf("GET = %d %q, want 200 with the version", resp.StatusCode, body)
	}
	if n := l.accepted.Load(); n != 2 {
		t.Errorf("the dashboard saw %d connections, want 2 (one dropped, one answered)", n)
	}
}

func TestProxyDoesNotResendAPost(t *testing.T) {
	l, base := dashboardThatDropsItsFirstConnection(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/jobs/", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := (retryUnanswered{base: &http.Transport{}}).RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatalf("POST through a dropped connection answered %d, want its error", resp.StatusCode)
	}
	if n := l.accepted.Load(); n != 1 {
		t.Errorf("the dashboard saw %d connections, want the POST sent once", n)
	}
}
