package raytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// sessionEnv names the variable that describes the session head of a kind.
func sessionEnv(token bool) string {
	if token {
		return "RAYSTEP_TEST_TOKEN_HEAD"
	}
	return "RAYSTEP_TEST_HEAD"
}

// sessionHead is a head test/suite started for the whole run.
type sessionHead struct {
	dashboard, gcs, tempDir, tokenFile, token string
}

func (h *sessionHead) DashboardURL() string { return h.dashboard }
func (h *sessionHead) Address() string      { return h.gcs }
func (h *sessionHead) Token() string        { return h.token }
func (h *sessionHead) TokenFile() string    { return h.tokenFile }
func (h *sessionHead) TempDir() string      { return h.tempDir }

// filePoll is how often attach looks for the session head's file, which
// test/suite writes once the head is ready (it starts while tests compile).
const filePoll = 100 * time.Millisecond

// answerWithin is how long a session head gets to answer before a
// package starts its own: a head that died refuses at once, a busy one
// answers within seconds.
const answerWithin = 30 * time.Second

// attach waits for the session head's file, reads it and checks that the
// head answers within answerWithin. Its errors say which head and why it
// cannot be used.
func attach(ctx context.Context, file string, token bool, answerWithin time.Duration) (*sessionHead, error) {
	what := fmt.Sprintf("the session head (%s=%s)", sessionEnv(token), file)
	tick := time.NewTicker(filePoll)
	defer tick.Stop()
	var b []byte
	for {
		var err error
		if b, err = os.ReadFile(file); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s was not ready: %w", what, context.Cause(ctx))
		case <-tick.C:
		}
	}
	h := &sessionHead{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "error":
			return nil, fmt.Errorf("%s is unusable: %s", what, v)
		case "dashboard":
			h.dashboard = v
		case "gcs":
			h.gcs = v
		case "temp-dir":
			h.tempDir = v
		case "token-file":
			h.tokenFile = v
		}
	}
	if h.dashboard == "" || h.gcs == "" || token != (h.tokenFile != "") {
		return nil, fmt.Errorf("%s: the file lacks dashboard=, gcs= or (only for the token head) token-file=:\n%s", what, b)
	}
	if token {
		t, err := os.ReadFile(h.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("%s: read its token: %w", what, err)
		}
		h.token = strings.TrimSpace(string(t))
	}
	if err := answers(ctx, h, answerWithin); err != nil {
		return nil, fmt.Errorf("%s does not answer: %w", what, err)
	}
	return h, nil
}

// answers asks the head's dashboard for its version, once a second
// within the given time.
func answers(ctx context.Context, h *sessionHead, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.dashboard+"/api/version", nil)
		if err != nil {
			return err
		}
		if h.token != "" {
			req.Header.Set("Authorization", "Bearer "+h.token)
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /api/version: %s", resp.Status)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return errors.Join(last, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(last, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// RunID returns an identity for t's steps that no other test of the run
// shares, for Dagster run ids and step names on a shared head: the
// test's name made safe, and a random suffix.
func RunID(t testing.TB) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return strings.Trim(name, "-") + "-" + randomSuffix(t)
}

// Name returns prefix and a random suffix: a cluster, job or step name
// that no other test of the run uses on a shared head.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	return prefix + "-" + randomSuffix(t)
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
