package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The Ray dashboard of a cluster, /clusters/{ns}/{name}/dashboard/,
// proxied over the same access as steps (see Reach): a person needs no
// port-forward of their own. The UI's auth stays in front; the UI's own
// credentials (its Authorization header and cookies) never go upstream,
// and the cluster's Ray token goes upstream only: answers lose their
// Set-Cookie, so no Ray cookie (which would carry the token) reaches the
// browser. Read-only like the rest of the UI: only GET (websockets
// included) is proxied. The Jobs API's answers (api/jobs/...) lose the
// values of their runtime_env's env_vars, which may hold secrets; what
// Ray shows elsewhere (a job's own log, its other APIs) passes as Ray
// serves it.

// dashboardCSP is the Content-Security-Policy of the proxied dashboard:
// Ray's dashboard is a React app that loads its own scripts and injects
// its styles, so styles may be inline; everything stays same-origin.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) dashboardProxy(w http.ResponseWriter, r *http.Request) {
	rec := s.find(w, r)
	if rec == nil {
		return
	}
	h, err := s.shared().probes.reach(r.Context(), rec)
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, ErrNoDashboard) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, "reach the Ray dashboard: "+err.Error(), code)
		return
	}
	target, err := url.Parse(h.URL)
	if err != nil {
		http.Error(w, "the Ray dashboard's URL: "+err.Error(), http.StatusBadGateway)
		return
	}
	prefix := ClusterPath(rec) + "dashboard/"
	w.Header().Set("Content-Security-Policy", dashboardCSP)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
			out.URL.Path = strings.TrimSuffix(target.Path, "/") + "/" + r.PathValue("path")
			out.URL.RawPath = ""
			out.Host = target.Host
			for _, k := range []string{"Authorization", "X-Ray-Authorization", "Cookie", "Origin", "Referer"} {
				out.Header.Del(k)
			}
			for k, vs := range h.Headers {
				out.Header[k] = append([]string(nil), vs...)
			}
			if jobsAPI(r.PathValue("path")) {
				out.Header.Del("Accept-Encoding") // redactEnv reads the JSON
			}
			if h.Token != "" {
				out.Header.Set("Authorization", "Bearer "+h.Token)
				out.Header.Set("X-Ray-Authorization", "Bearer "+h.Token)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("Set-Cookie")
			if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
				resp.Header.Set("Location", prefix+strings.TrimPrefix(loc, "/"))
			}
			if jobsAPI(r.PathValue("path")) {
				return redactEnv(resp)
			}
			return nil
		},
		Transport: retryUnanswered{base: http.DefaultTransport},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "the Ray dashboard did not answer: "+redacted(err, h.Token).Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}

// retryUnanswered is the proxy's transport. A GET without a body (all the
// proxy sends) that got no answer at all, because its connection through a
// port-forward was refused or reset before the dashboard saw it, goes again,
// up to proxyAttempts times within the request's context: a forward that
// met a broken stream ends and opens itself again on the same port
// (kuberay.HeadForward), and the page load that found it broken should not
// be lost. An answer, of any status, is final.
type retryUnanswered struct{ base http.RoundTripper }

// proxyAttempts bounds the sends of one request; the waits between them
// double from proxyRetryWait.
const (
	proxyAttempts  = 5
	proxyRetryWait = 100 * time.Millisecond
)

func (t retryUnanswered) RoundTrip(r *http.Request) (*http.Response, error) {
	wait := proxyRetryWait
	for attempt := 1; ; attempt++ {
		resp, err := t.base.RoundTrip(r)
		if err == nil || attempt == proxyAttempts || r.Method != http.MethodGet || (r.Body != nil && r.Body != http.NoBody) {
			return resp, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-r.Context().Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		wait *= 2
	}
}

// redacted is err with token cut out of its text.
func redacted(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "REDACTED"))
}

// jobsAPI reports whether a dashboard path is the Jobs API's.
func jobsAPI(path string) bool { return strings.HasPrefix(path, "api/jobs") }

// hiddenEnv replaces the value of every runtime_env env var.
const hiddenEnv = "(hidden by raystep ui)"

// maxJobsAnswer bounds a Jobs API answer the proxy rewrites.
const maxJobsAnswer = 64 << 20

// redactEnv rewrites a JSON answer of the Jobs API without the values of
// its runtime_env env_vars; an answer that is not JSON passes unchanged.
func redactEnv(resp *http.Response) error {
	if !strings.Contains(resp.Header.Get("Content-Type"), "json") || resp.Header.Get("Content-Encoding") != "" {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJobsAnswer+1))
	resp.Body.Close()
	if err != nil {
		return err
	}
	if len(b) > maxJobsAnswer {
		return errors.New("the Jobs API's answer is too large to check for env values")
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New("the Jobs API's answer is not the JSON it claims to be")
	}
	hideEnv(v)
	if b, err = json.Marshal(v); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}

// hideEnv replaces, anywhere in v, the values of the env_vars of a
// runtime_env.
func hideEnv(v any) {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			hideEnv(e)
		}
	case map[string]any:
		for k, e := range t {
			m, ok := e.(map[string]any)
			if env, isMap := m["env_vars"].(map[string]any); ok && isMap && (k == "runtime_env" || k == "runtimeEnv") {
				for name := range env {
					env[name] = hiddenEnv
				}
			}
			hideEnv(e)
		}
	}
}
