package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
// included) of the paths the dashboard's own pages read (dashboardReads)
// is proxied; profilers, tracebacks, the state API's job list and
// whatever else a GET could start are refused. Every JSON answer loses the
// values of the env_vars of every runtime_env in it, whether Ray sends
// one as an object or as a serialized string (state rows'
// serialized_runtime_env, runtime_env_info): they may hold secrets. Log
// files pass as Ray serves them, as the UI's own log pages do.

// dashboardCSP is the Content-Security-Policy of the proxied dashboard:
// Ray's dashboard is a React app that loads its own scripts and injects
// its styles, so styles may be inline; everything stays same-origin.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) dashboardProxy(w http.ResponseWriter, r *http.Request) {
	if p := r.PathValue("path"); !dashboardRead(p) {
		http.Error(w, fmt.Sprintf("forbidden: raystep ui's dashboard proxy is read-only and forwards only what the dashboard's pages read, not %q", p),
			http.StatusForbidden)
		return
	}
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
			out.Header.Del("Accept-Encoding") // redactEnv reads the JSON
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
			return redactEnv(resp)
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

// dashboardReads are the paths (below the dashboard's root) that Ray's
// dashboard pages read: its page and scripts, the overview, jobs, nodes,
// actors, tasks, logs, Serve and Data views. A "*" stands for one path
// segment, a final "**" for any rest. What is not here is refused:
// profilers (worker/cpu_profile, worker/gpu_profile, memory_profile,
// task/cpu_profile), tracebacks, api/actors/kill, the state API's
// api/v0/jobs and any API to come.
var dashboardReads = [][]string{}

func init() {
	for _, p := range []string{
		"", "index.html", "favicon.ico", "static/**",
		"timezone", "events", "api/version", "api/cluster_status", "api/grafana_health", "api/prometheus_health",
		"api/profiling_enabled", "api/authentication_mode", "api/v0/cluster_metadata", "api/v0/runtime_env_redaction",
		"api/jobs/", "api/jobs/*", "api/jobs/*/logs", "api/jobs/*/logs/tail",
		"api/v0/tasks", "api/v0/tasks/summarize", "api/v0/tasks/timeline", "api/v0/placement_groups",
		"api/v0/platform_events", "api/v0/logs", "api/v0/logs/file",
		"nodes", "nodes/*", "logical/actors", "logical/actors/*",
		"api/serve/applications/", "api/data/datasets/*",
	} {
		dashboardReads = append(dashboardReads, strings.Split(p, "/"))
	}
}

// dashboardRead reports whether path (below the dashboard's root, as the
// route's {path...} has it: unescaped) is one of dashboardReads. A path
// with a "." or ".." segment or a backslash is not, whatever follows:
// the dashboard would resolve it to another path than the one checked.
func dashboardRead(path string) bool {
	segs := strings.Split(path, "/")
	for _, s := range segs {
		if s == "." || s == ".." || strings.ContainsAny(s, "\\\x00") {
			return false
		}
	}
	for _, p := range dashboardReads {
		if matchSegments(p, segs) {
			return true
		}
	}
	return false
}

func matchSegments(pattern, segs []string) bool {
	for i, p := range pattern {
		if p == "**" {
			return i < len(segs) && segs[i] != ""
		}
		if i >= len(segs) || (p == "*" && segs[i] == "") || (p != "*" && p != segs[i]) {
			return false
		}
	}
	return len(segs) == len(pattern)
}

// hiddenEnv replaces the value of every runtime_env env var.
const hiddenEnv = "(hidden by raystep ui)"

// maxJSONAnswer bounds a JSON answer the proxy rewrites.
const maxJSONAnswer = 64 << 20

// redactEnv rewrites a JSON answer without the values of the env_vars of
// its runtime_envs (hideEnv); an answer that is not JSON passes unchanged.
func redactEnv(resp *http.Response) error {
	if !strings.Contains(resp.Header.Get("Content-Type"), "json") || resp.Header.Get("Content-Encoding") != "" {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer+1))
	resp.Body.Close()
	if err != nil {
		return err
	}
	if len(b) > maxJSONAnswer {
		return errors.New("the dashboard's answer is too large to check for env values")
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New("the dashboard's answer is not the JSON it claims to be")
	}
	if b, err = json.Marshal(hideEnv(v)); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}

// hideEnv returns v with, anywhere in it, the values of every env_vars
// object replaced by hiddenEnv (a string there is hidden whole), and every string held under a key naming
// a runtime_env (serialized_runtime_env, runtime_env) that is a
// serialized runtime_env redacted the same way. What does not parse as
// one is hidden whole: a secret may be in it.
func hideEnv(v any) any {
	switch t := v.(type) {
	case []any:
		for i, e := range t {
			t[i] = hideEnv(e)
		}
	case map[string]any:
		for k, e := range t {
			switch env := e.(type) {
			case map[string]any:
				if k == "env_vars" {
					for name := range env {
						env[name] = hiddenEnv
					}
					continue
				}
			case string:
				if k == "env_vars" {
					t[k] = hiddenEnv
					continue
				}
				if strings.Contains(k, "runtime_env") && env != "" {
					t[k] = hideSerialized(env)
					continue
				}
			}
			t[k] = hideEnv(e)
		}
	}
	return v
}

// hideSerialized is hideEnv for a runtime_env serialized as a JSON string.
func hideSerialized(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return hiddenEnv
	}
	if _, ok := v.(map[string]any); !ok {
		return hiddenEnv
	}
	b, err := json.Marshal(hideEnv(v))
	if err != nil {
		return hiddenEnv
	}
	return string(b)
}
