package ui

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Sites is where the UI may be reached from: the Host names it answers
// and the origins whose pages may read it. A page elsewhere (another
// site, a name rebound to 127.0.0.1) reaches neither the page, the API,
// the event streams nor the dashboard proxy: the UI on loopback needs no
// login, so a browser must not be made to read it for someone else.
//
// The zero value answers loopback names only (localhost, 127.0.0.0/8,
// ::1) and same-origin requests only.
type Sites struct {
	// Hosts are further host names (no port) the UI answers, lower case:
	// the listen address's, and those of PublicURLs.
	Hosts []string
	// Origins are further origins (scheme://host[:port]) that may read
	// the UI: those of PublicURLs, for a proxy that changes Host.
	Origins []string
}

// NewSites returns the sites of a UI listening on addr (HOST:PORT) and
// reached, beside loopback, at the public URLs (e.g. an Ingress's
// https://raystep.example.com/). On every interface (0.0.0.0, ::, an
// empty host) the machine's own addresses and host name are its names too.
func NewSites(addr string, public []string) (Sites, error) {
	var s Sites
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return s, fmt.Errorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:8080: %w", addr, err)
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		s.Hosts = append(s.Hosts, machineNames()...)
	} else {
		s.Hosts = append(s.Hosts, host)
	}
	for _, p := range public {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
			return s, fmt.Errorf("--public-url %q: want the http(s) URL people open, e.g. https://raystep.example.com/", p)
		}
		s.Hosts = append(s.Hosts, u.Hostname())
		s.Origins = append(s.Origins, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	for i, h := range s.Hosts {
		s.Hosts[i] = canonicalHost(h)
	}
	slices.Sort(s.Hosts)
	s.Hosts = slices.Compact(s.Hosts)
	return s, nil
}

// machineNames are this machine's host name and interface addresses.
func machineNames() []string {
	var names []string
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			names = append(names, p.Addr().WithZone("").String())
		}
	}
	return names
}

// canonicalHost is a host name as Sites compares it: lower case, without
// a port, IPv6 brackets or a trailing dot.
func canonicalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return strings.ToLower(h)
}

// answers reports whether host (a Host header) names the UI.
func (s Sites) answers(host string) bool {
	h := canonicalHost(host)
	if h == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(h); err == nil && ip.IsLoopback() {
		return true
	}
	_, found := slices.BinarySearch(s.Hosts, h)
	return found
}

// sameOrigin reports whether r comes from the UI's own pages (or from no
// browser page at all: curl, a script). A browser names the page's origin
// in Origin on cross-origin reads, WebSockets and module scripts; where it
// sends none, Sec-Fetch-Site says whether the request is cross-site. Only
// a top-level navigation may come from elsewhere (a link in Dagster): its
// answer is shown, not handed to the page that linked it.
func (s Sites) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
			return true
		}
		return r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false // "null" (a sandboxed frame, a file: page) included
	}
	if strings.EqualFold(u.Host, r.Host) && s.answers(u.Host) {
		return true
	}
	return slices.Contains(s.Origins, strings.ToLower(u.Scheme+"://"+u.Host))
}

// guard refuses a request for another host name (421) or from another
// origin's page (403) before auth sees it.
func (s Sites) guard(w http.ResponseWriter, r *http.Request) bool {
	if !s.answers(r.Host) {
		http.Error(w, fmt.Sprintf("misdirected request: raystep ui does not answer for host %q; "+
			"if people reach it by that name, start it with --public-url naming it", r.Host), http.StatusMisdirectedRequest)
		return false
	}
	if !s.sameOrigin(r) {
		http.Error(w, "forbidden: raystep ui answers its own pages only, not a page of another origin", http.StatusForbidden)
		return false
	}
	return true
}
