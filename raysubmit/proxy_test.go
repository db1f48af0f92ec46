package raysubmit_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fault is what faultProxy does to one request.
type fault int

const (
	pass       fault = iota
	reply503         // answer 503 without forwarding
	resetFirst       // reset the connection without forwarding
	resetAfter       // forward, drop the answer, reset the connection
)

// faultProxy sits between a client and the real head and injects faults:
// plan picks a fault per request, and the i-th websocket connection is cut
// after wsCuts[i] bytes from the head (a negative or missing entry: never).
type faultProxy struct {
	t      *testing.T
	target *url.URL
	srv    *httptest.Server
	plan   func(r *http.Request) fault
	wsCuts []int64

	mu      sync.Mutex
	wsConns int
	log     []string
}

func newFaultProxy(t *testing.T, target string, plan func(*http.Request) fault, wsCuts ...int64) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	if plan == nil {
		plan = func(*http.Request) fault { return pass }
	}
	p := &faultProxy{t: t, target: u, plan: plan, wsCuts: wsCuts}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the proxy's base URL.
func (p *faultProxy) URL() string { return p.srv.URL }

// Events returns what the proxy did, one entry per injected fault.
func (p *faultProxy) Events() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *faultProxy) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, s)
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	f := p.plan(r)
	what := r.Method + " " + r.URL.Path
	switch f {
	case reply503:
		p.record("503 " + what)
		w.Header().Set("Retry-After", "0")
		http.Error(w, "injected outage", http.StatusServiceUnavailable)
		return
	case resetFirst:
		p.record("reset-before " + what)
		reset(w)
		return
	case resetAfter:
		p.record("reset-after " + what)
		resp, err := http.DefaultTransport.RoundTrip(p.outbound(r))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		reset(w)
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		p.websocket(w, r)
		return
	}
	httputil.NewSingleHostReverseProxy(p.target).ServeHTTP(w, r)
}

func (p *faultProxy) outbound(r *http.Request) *http.Request {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = p.target.Scheme, p.target.Host, p.target.Host, ""
	return out
}

// websocket splices the connection to the head at the TCP level, cutting
// it after the planned number of bytes.
func (p *faultProxy) websocket(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	n := p.wsConns
	p.wsConns++
	p.mu.Unlock()
	cut := int64(-1)
	if n < len(p.wsCuts) {
		cut = p.wsCuts[n]
	}
	back, err := net.Dial("tcp", p.target.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer back.Close()
	front, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer front.Close()
	r.Host = p.target.Host
	if err := r.Write(back); err != nil {
		return
	}
	go func() { _, _ = io.Copy(back, buf) }()
	if cut < 0 {
		_, _ = io.Copy(front, back)
		return
	}
	copied, _ := io.Copy(front, io.LimitReader(bufio.NewReader(back), cut))
	if copied == cut {
		p.record("cut websocket")
		if tc, ok := front.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
}

// reset closes the client's connection with a TCP reset.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}
