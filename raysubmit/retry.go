package raysubmit

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/zap"
)

// CheckRetry is the Client's retry policy (a retryablehttp.CheckRetry). It
// stops when ctx is done; retries connection errors except certificate
// failures; retries 429, 502, 503 and 504 (retryablehttp.DefaultBackoff
// honours Retry-After on 429 and 503); retries a 500 only when the head
// says it could not talk to a job agent: no agent was available (the request
// was not acted on), or the head's connection to the agent broke (it may
// have been: a repeated submit then meets its own first attempt and is
// refused as a duplicate, which callers treat as attaching). Other statuses
// are answers, not failures.
func CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, context.Cause(ctx)
	}
	if err != nil {
		if certificateError(err) {
			return false, err
		}
		return true, nil
	}
	if retryableStatus(resp) {
		return true, nil
	}
	if resp.StatusCode == http.StatusInternalServerError {
		return bodyContains(resp, agentUnreachable...), nil
	}
	return false, nil
}

// agentUnreachable are what the head's 500 says when it did not get an
// answer from the job agent it forwards a request to: Ray's own message
// when none was ready, or the traceback of the aiohttp client error it met
// (the agent closed the connection, refused it, or reset it; seen on a
// loaded machine).
var agentUnreachable = []string{
	"No available agent to submit job",
	"aiohttp.client_exceptions.ServerDisconnectedError",
	"aiohttp.client_exceptions.ClientConnectorError",
	"aiohttp.client_exceptions.ClientOSError",
}

// certificateError reports a TLS certificate the Client refused: trying
// again cannot help.
func certificateError(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// retryableStatus reports a status that says "not now": 429, 502, 503, 504.
func retryableStatus(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// bodyContains peeks at the start of resp's body for any of subs, leaving
// the body readable from the start.
func bodyContains(resp *http.Response, subs ...string) bool {
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	for _, s := range subs {
		if strings.Contains(string(head), s) {
			return true
		}
	}
	return false
}

type readCloser struct {
	io.Reader
	io.Closer
}

// LeveledLogger adapts a zap.Logger to retryablehttp.LeveledLogger. It
// logs every message at debug level: retryablehttp reports single attempts
// (a failed attempt it is about to retry as an error), and whatever finally
// fails reaches the Client's caller as an error anyway.
type LeveledLogger struct {
	s *zap.SugaredLogger
}

var _ retryablehttp.LeveledLogger = LeveledLogger{}

// NewLeveledLogger returns l as a retryablehttp.LeveledLogger.
func NewLeveledLogger(l *zap.Logger) LeveledLogger {
	return LeveledLogger{s: l.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

// Error logs an attempt's failure at debug level.
func (l LeveledLogger) Error(msg string, kv ...any) { l.s.Debugw(msg, kv...) }

// Warn logs at debug level.
func (l LeveledLogger) Warn(msg string, kv ...any) { l.s.Debugw(msg, kv...) }

// Info logs at debug level.
func (l LeveledLogger) Info(msg string, kv ...any) { l.s.Debugw(msg, kv...) }

// Debug logs at debug level.
func (l LeveledLogger) Debug(msg string, kv ...any) { l.s.Debugw(msg, kv...) }
