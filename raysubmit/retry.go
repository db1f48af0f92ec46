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
// honours Retry-After on 429 and 503); retries a 500 only when Ray says no
// job agent was available, which means the request was not acted on. Other
// statuses are answers, not failures.
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
		return bodyContains(resp, "No available agent to submit job"), nil
	}
	return false, nil
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

// bodyContains peeks at the start of resp's body for s, leaving the body
// readable from the start.
func bodyContains(resp *http.Response, s string) bool {
	head, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return err == nil && strings.Contains(string(head), s)
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
