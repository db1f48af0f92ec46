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
		var unknownAuthority x509.UnknownAuthorityError
		var hostname x509.HostnameError
		var invalid x509.CertificateInvalidError
		if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) {
			return false, err
		}
		return true, nil
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, nil
	case http.StatusInternalServerError:
		return bodyContains(resp, "No available agent to submit job"), nil
	}
	return false, nil
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

// LeveledLogger adapts a zap.Logger to retryablehttp.LeveledLogger.
type LeveledLogger struct {
	s *zap.SugaredLogger
}

var _ retryablehttp.LeveledLogger = LeveledLogger{}

// NewLeveledLogger returns l as a retryablehttp.LeveledLogger.
func NewLeveledLogger(l *zap.Logger) LeveledLogger {
	return LeveledLogger{s: l.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

// Error logs at error level.
func (l LeveledLogger) Error(msg string, kv ...any) { l.s.Errorw(msg, kv...) }

// Warn logs at warn level.
func (l LeveledLogger) Warn(msg string, kv ...any) { l.s.Warnw(msg, kv...) }

// Info logs at info level.
func (l LeveledLogger) Info(msg string, kv ...any) { l.s.Infow(msg, kv...) }

// Debug logs at debug level.
func (l LeveledLogger) Debug(msg string, kv ...any) { l.s.Debugw(msg, kv...) }
