// Package raysubmit is a client of the Ray Jobs REST API served by a Ray
// dashboard: submit a job, read and wait for its status, follow its logs,
// stop and delete it, and upload a working directory as a Ray package.
//
// Requests go through a *retryablehttp.Client whose policy (CheckRetry)
// retries connection errors, 429 (honouring Retry-After), 502, 503 and 504
// with exponential backoff, and a 500 whose body says no job agent was ready
// yet; every other status is final. Every call is safe to repeat: Submit
// always carries a submission id (it makes one when the caller gives none),
// so a repeated submit that already took effect is refused by Ray as a
// duplicate instead of starting a twin; stop, delete and package upload are
// idempotent. Waits honour the context. Follow is the one exception to the
// policy: it retries by itself, one try at a time, within an outage budget
// (MaxOutage) whose worst case its doc comment states.
//
// Outcomes callers branch on are sentinel errors (ErrNotFound,
// ErrAlreadySubmitted); any other refusal is an *APIError with the status
// and body. The bearer token never appears in logs or errors.
//
// raysubmit knows nothing about clusters: where the dashboard is and how it
// is reached (port-forward, TLS, tokens) is decided by its caller.
package raysubmit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/zap"
)

// DefaultUserAgent is the User-Agent sent when Config.UserAgent is empty.
const DefaultUserAgent = "raystep/dev"

// Config holds what New needs to build a Client.
type Config struct {
	// BaseURL is the dashboard URL, e.g. http://127.0.0.1:8265.
	BaseURL string
	// Headers are sent with every request (and the websocket handshake).
	Headers http.Header
	// Token, when set, is sent as a bearer token in both Authorization and
	// X-Ray-Authorization.
	Token string
	// CAFile is a PEM bundle trusted in addition to the system roots.
	CAFile string
	// InsecureSkipVerify disables TLS verification; only when asked for.
	InsecureSkipVerify bool
	// UserAgent names the caller, e.g. "raystep/1.2.3"; empty means DefaultUserAgent.
	UserAgent string
	// Logger receives request and retry logs; nil means none.
	Logger *zap.Logger
}

// Client talks to one Ray dashboard. Build it with New; its fields may be
// adjusted before first use and must not change afterwards.
type Client struct {
	// BaseURL is the dashboard URL without a trailing slash.
	BaseURL string
	// Headers are added to every request.
	Headers http.Header
	// Token is the bearer token; it is redacted from errors.
	Token string
	// UserAgent is sent as User-Agent.
	UserAgent string
	// HTTP performs requests with the retry policy described in the package comment.
	HTTP *retryablehttp.Client
	// Logger receives the client's own logs.
	Logger *zap.Logger
	// PollInterval is how often Wait polls the job status, and the longest
	// Follow waits between two polls (see nextPoll).
	PollInterval time.Duration
	// ReconnectWait is Follow's pause before it tries again after a failed
	// try or a dropped log stream; it doubles while tries keep failing, up
	// to eight times ReconnectWait.
	ReconnectWait time.Duration
	// AttemptTimeout fails one of Follow's tries when the dashboard says
	// nothing for that long (a silent log stream is fine).
	AttemptTimeout time.Duration
	// MaxOutage is how long Follow keeps trying a dashboard that does not
	// answer before it gives up with ErrUnreachable.
	MaxOutage time.Duration
}

// Defaults of Follow's retry budget (see Follow).
const (
	DefaultReconnectWait  = 500 * time.Millisecond
	DefaultAttemptTimeout = 10 * time.Second
	DefaultMaxOutage      = 3 * time.Minute
)

// New returns a Client for cfg with the default retry policy.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid dashboard URL %q: want http(s)://host:port", redactURL(cfg.BaseURL))
	}
	transport := cleanhttp.DefaultPooledTransport()
	if cfg.CAFile != "" || cfg.InsecureSkipVerify {
		tlsCfg, err := tlsConfig(cfg.CAFile, cfg.InsecureSkipVerify)
		if err != nil {
			return nil, err
		}
		transport.TLSClientConfig = tlsCfg
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: transport}
	rc.Logger = NewLeveledLogger(logger)
	rc.RetryWaitMin = 250 * time.Millisecond
	rc.RetryWaitMax = 10 * time.Second
	rc.RetryMax = 8
	rc.CheckRetry = CheckRetry
	rc.Backoff = retryablehttp.DefaultBackoff
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &Client{
		BaseURL:        strings.TrimRight(cfg.BaseURL, "/"),
		Headers:        cfg.Headers.Clone(),
		Token:          cfg.Token,
		UserAgent:      orDefault(cfg.UserAgent, DefaultUserAgent),
		HTTP:           rc,
		Logger:         logger,
		PollInterval:   time.Second,
		ReconnectWait:  DefaultReconnectWait,
		AttemptTimeout: DefaultAttemptTimeout,
		MaxOutage:      DefaultMaxOutage,
	}, nil
}

func tlsConfig(caFile string, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // only when asked
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// ErrNotFound means the job (or package) does not exist.
var ErrNotFound = errors.New("not found")

// ErrAlreadySubmitted means Ray refused a submission id it has seen before:
// the job exists, and the caller may attach to it.
var ErrAlreadySubmitted = errors.New("submission id already used")

// APIError is a response Ray refused with, other than the sentinel outcomes.
type APIError struct {
	// Method and Path say which call failed.
	Method, Path string
	// StatusCode is the HTTP status.
	StatusCode int
	// Body is the start of the response body (Ray often sends a traceback).
	Body string
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.StatusCode, strings.TrimSpace(e.Body))
}

// maxErrorBody bounds how much of an error body is kept.
const maxErrorBody = 8 << 10

// newRequest builds a request for path (relative to BaseURL) with the
// client's headers; body may be nil, []byte or a retryablehttp.ReaderFunc.
func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*retryablehttp.Request, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	c.setHeaders(req.Header)
	return req, nil
}

func (c *Client) setHeaders(h http.Header) {
	for k, vs := range c.Headers {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	h.Set("User-Agent", c.UserAgent)
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
		h.Set("X-Ray-Authorization", "Bearer "+c.Token)
	}
}

// do sends req and decodes a 200 JSON answer into out (when not nil). A
// non-200 answer becomes ErrNotFound, ErrAlreadySubmitted or *APIError.
func (c *Client) do(req *retryablehttp.Request, out any) error {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.redact(fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(req.Method, req.URL.Path, resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// statusError turns a refused response into the error callers branch on.
func (c *Client) statusError(method, path string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	text := c.redactString(string(body))
	switch {
	case strings.Contains(text, "Please use a different submission_id"):
		return fmt.Errorf("%s %s: %w", method, path, ErrAlreadySubmitted)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s %s: %w", method, path, ErrNotFound)
	}
	return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Body: text}
}

// redact removes the token from an error's text.
func (c *Client) redact(err error) error {
	if c.Token == "" || !strings.Contains(err.Error(), c.Token) {
		return err
	}
	return &redactedError{msg: c.redactString(err.Error()), err: err}
}

func (c *Client) redactString(s string) string {
	if c.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Token, "REDACTED")
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactURL hides a password in a URL string.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparseable URL>"
	}
	return u.Redacted()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
