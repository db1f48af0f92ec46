package ui

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
)

// ErrExposed is returned by CheckAddr for an address other machines can
// reach when no authentication is configured.
var ErrExposed = errors.New("listening beyond loopback needs --auth-token-file or --auth-proxy-header")

// ErrUntrustedHeader is returned by CheckAddr for an address other
// machines can reach when only a header, which any client can send,
// would let them in.
var ErrUntrustedHeader = errors.New("--auth-proxy-header beyond loopback needs --auth-token-file too, " +
	"or --trusted-proxy naming the proxy's addresses: any client can send the header")

// Auth decides who may read the page. The zero value lets everyone in,
// which CheckAddr allows on loopback only.
type Auth struct {
	// Token, when set, must come as "Authorization: Bearer TOKEN", or as
	// the cookie a first visit with ?token=TOKEN sets.
	Token string
	// ProxyHeader, when set, names a header a trusted authenticating proxy
	// in front of raystep sets (e.g. X-Forwarded-User); requests without
	// it are refused.
	ProxyHeader string
	// TrustedProxies, when set, are the addresses the requests must come
	// from (the authenticating proxy's); others are refused.
	TrustedProxies []netip.Prefix
	// Sites are the host names and origins the UI answers.
	Sites Sites
}

// cookieName is the cookie that carries the token after ?token=.
const cookieName = "raystep_ui_token"

// ReadToken reads a token file: its content without surrounding space,
// never empty.
func ReadToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--auth-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--auth-token-file %s: the file is empty: want the token on one line", file)
	}
	return token, nil
}

// CheckAddr refuses a listen address that is not host:port (a port from 0
// to 65535, or a service name), and one whose host is not loopback
// (127.0.0.0/8, ::1 or localhost) when auth lets everyone in, or lets in
// whoever sends the proxy's header.
func CheckAddr(addr string, auth Auth) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:8080: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("--addr %q: want a port from 0 to 65535 (0 picks a free one): %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	switch {
	case auth.Token != "":
		return nil
	case auth.ProxyHeader == "":
		return fmt.Errorf("--addr %s: %w", addr, ErrExposed)
	case len(auth.TrustedProxies) == 0:
		return fmt.Errorf("--addr %s: %w", addr, ErrUntrustedHeader)
	}
	return nil
}

// ParseTrustedProxies parses --trusted-proxy values: CIDR ranges
// (10.0.0.0/8) or single addresses.
func ParseTrustedProxies(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("--trusted-proxy %q: want an address or a CIDR range such as 10.0.0.0/8", v)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// fromTrustedProxy reports whether r came from one of the trusted proxies
// (from anywhere when none is named).
func (a Auth) fromTrustedProxy(r *http.Request) bool {
	if len(a.TrustedProxies) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range a.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// wrap puts the security headers on every answer, refuses requests for
// another host or from another origin's page (Sites), from an address
// that is not a trusted proxy (403), and those auth does not let in (401).
func (a Auth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !a.Sites.guard(w, r) {
			return
		}
		if !a.fromTrustedProxy(r) {
			http.Error(w, "forbidden: only the trusted proxy (--trusted-proxy) may reach raystep ui", http.StatusForbidden)
			return
		}
		if a.ProxyHeader != "" && r.Header.Get(a.ProxyHeader) == "" {
			http.Error(w, "unauthorized: no "+a.ProxyHeader+" header from the authenticating proxy", http.StatusUnauthorized)
			return
		}
		if a.Token == "" {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); q.Has("token") {
			a.exchange(w, r, q.Get("token"))
			return
		}
		if !a.presented(r) {
			h.Set("WWW-Authenticate", `Bearer realm="raystep ui"`)
			http.Error(w, "unauthorized: send Authorization: Bearer TOKEN, or open the page once with ?token=TOKEN", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// exchange turns a right ?token= into a cookie and sends the browser to
// the same URL without it, so the token stays out of history and logs.
func (a Auth) exchange(w http.ResponseWriter, r *http.Request, token string) {
	if !a.equal(token) {
		http.Error(w, "unauthorized: wrong token", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	u := *r.URL
	q := u.Query()
	q.Del("token")
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}

// presented says whether r carries the token in its header or cookie.
func (a Auth) presented(r *http.Request) bool {
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && a.equal(bearer) {
		return true
	}
	c, err := r.Cookie(cookieName)
	return err == nil && a.equal(c.Value)
}

func (a Auth) equal(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) == 1
}
