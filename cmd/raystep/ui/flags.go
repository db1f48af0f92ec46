package ui

import (
	"errors"
	"fmt"
	"net/url"
)

// Flags are raystep ui's flags that say who may read the page and where
// its links go.
type Flags struct {
	// Addr is --addr, HOST:PORT.
	Addr string
	// TokenFile is --auth-token-file, ProxyHeader --auth-proxy-header,
	// Trusted the --trusted-proxy values.
	TokenFile, ProxyHeader string
	Trusted                []string
	// PublicURLs are the --public-url values.
	PublicURLs []string
	// DagsterURL is --dagster-url.
	DagsterURL string
}

// Check checks the flags, before anything connects or listens, and
// returns how requests are authenticated and the Dagster UI's URL (nil
// without one). Its errors are the user's mistakes.
func (f Flags) Check() (Auth, *url.URL, error) {
	var auth Auth
	auth.ProxyHeader = f.ProxyHeader
	trusted, err := ParseTrustedProxies(f.Trusted)
	if err != nil {
		return auth, nil, err
	}
	if len(trusted) > 0 && f.ProxyHeader == "" {
		return auth, nil, errors.New("--trusted-proxy goes with --auth-proxy-header: it names where that header may come from")
	}
	auth.TrustedProxies = trusted
	if auth.Sites, err = NewSites(f.Addr, f.PublicURLs); err != nil {
		return auth, nil, err
	}
	if f.TokenFile != "" {
		if auth.Token, err = ReadToken(f.TokenFile); err != nil {
			return auth, nil, err
		}
	}
	if err := CheckAddr(f.Addr, auth); err != nil {
		return auth, nil, err
	}
	if f.DagsterURL == "" {
		return auth, nil, nil
	}
	u, err := url.Parse(f.DagsterURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return auth, nil, fmt.Errorf("--dagster-url %q: want an http(s) URL such as http://localhost:3000", f.DagsterURL)
	}
	return auth, u, nil
}
