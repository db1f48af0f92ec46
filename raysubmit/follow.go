package raysubmit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// Follow copies the job's log to w as it is written, until the job is
// terminal and its log complete, and returns the number of bytes written.
//
// It reads /api/jobs/{id}/logs/tail over a websocket. Ray's tail endpoint
// replays the log file from its first byte on every connection, so Follow
// counts the bytes it has delivered and, after a dropped connection,
// reconnects and discards that many bytes before writing again: no byte is
// repeated or skipped. Once the job is terminal (the tail ends, or a status
// poll every PollInterval says so) Follow reads the full log once,
// streaming it, and writes whatever the tail has not delivered: the tail
// can miss the end of the log, and it sends ten lines per frame, so a
// finished job's backlog comes much faster this way. Memory use does not
// grow with the log.
func (c *Client) Follow(ctx context.Context, id string, w io.Writer) (int64, error) {
	sw := &skipWriter{w: w}
	failures := 0
	for {
		d, err := c.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return 0, fmt.Errorf("follow logs of job %s: %w", id, err)
		}
		if err == nil && d.Status.Terminal() {
			break
		}
		before := sw.delivered
		sw.seen = 0
		ended, err := c.tailWhileRunning(ctx, id, sw)
		if ctx.Err() != nil {
			return sw.delivered, fmt.Errorf("follow logs of job %s: %w", id, context.Cause(ctx))
		}
		var apiErr *APIError
		if errors.Is(err, ErrNotFound) || errors.Is(err, errWrite) || errors.As(err, &apiErr) {
			return sw.delivered, fmt.Errorf("follow logs of job %s: %w", id, err)
		}
		if ended {
			break
		}
		if sw.delivered > before {
			failures = 0
		}
		failures++
		if failures > c.MaxReconnects {
			return sw.delivered, fmt.Errorf("follow logs of job %s: gave up after %d reconnections: %w", id, c.MaxReconnects, err)
		}
		c.Logger.Info("log stream dropped; reconnecting", zap.String("job", id),
			zap.Int64("delivered_bytes", sw.delivered), zap.Error(err))
		if err := sleepCtx(ctx, c.ReconnectWait); err != nil {
			return sw.delivered, fmt.Errorf("follow logs of job %s: %w", id, err)
		}
	}
	if err := c.catchUp(ctx, id, sw); err != nil {
		return sw.delivered, fmt.Errorf("follow logs of job %s: %w", id, err)
	}
	return sw.delivered, nil
}

// FollowLines is Follow with a callback per log line (without its newline).
// A last line without a newline is passed too. An error from fn stops the
// stream and is returned.
func (c *Client) FollowLines(ctx context.Context, id string, fn func(line []byte) error) error {
	lw := &lineWriter{fn: fn}
	if _, err := c.Follow(ctx, id, lw); err != nil {
		return err
	}
	return lw.flush()
}

// tailWhileRunning runs tailOnce until it ends or a status poll finds the
// job terminal, which it reports as ended.
func (c *Client) tailWhileRunning(ctx context.Context, id string, sw *skipWriter) (bool, error) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var terminal atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(c.PollInterval)
		defer tick.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-tick.C:
			}
			if t, err := c.jobTerminal(tctx, id); err == nil && t {
				terminal.Store(true)
				cancel()
				return
			}
		}
	}()
	ended, err := c.tailOnce(tctx, id, sw)
	cancel()
	<-done
	if terminal.Load() && ctx.Err() == nil {
		return true, nil
	}
	return ended, err
}

// tailOnce reads one websocket connection to its end. ended reports that
// the server closed the stream normally and the job is terminal.
func (c *Client) tailOnce(ctx context.Context, id string, sw *skipWriter) (ended bool, err error) {
	conn, err := c.dialTail(ctx, id)
	if err != nil {
		return false, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	for {
		_, r, err := conn.Reader(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return c.jobTerminal(ctx, id)
			}
			return false, err
		}
		if _, err := io.CopyBuffer(sw, r, sw.buf[:]); err != nil {
			return false, err
		}
	}
}

func (c *Client) dialTail(ctx context.Context, id string) (*websocket.Conn, error) {
	u, err := url.Parse(c.BaseURL + "/api/jobs/" + url.PathEscape(id) + "/logs/tail")
	if err != nil {
		return nil, fmt.Errorf("tail URL: %w", err)
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	header := http.Header{}
	c.setHeaders(header)
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient: c.HTTP.HTTPClient,
		HTTPHeader: header,
	})
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			if retry, _ := CheckRetry(ctx, resp, nil); !retry {
				return nil, fmt.Errorf("open log tail: %w", c.statusError(http.MethodGet, u.Path, resp))
			}
		}
		return nil, c.redact(fmt.Errorf("open log tail: %w", err))
	}
	return conn, nil
}

func (c *Client) jobTerminal(ctx context.Context, id string) (bool, error) {
	d, err := c.Get(ctx, id)
	if err != nil {
		return false, err
	}
	return d.Status.Terminal(), nil
}

// catchUp streams the full log and writes what the tail did not deliver.
func (c *Client) catchUp(ctx context.Context, id string, sw *skipWriter) error {
	req, err := c.newRequest(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id)+"/logs", nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.redact(fmt.Errorf("get full log: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(req.Method, req.URL.Path, resp)
	}
	sw.seen = 0
	if err := decodeLogs(resp.Body, sw); err != nil {
		return fmt.Errorf("read full log: %w", err)
	}
	return nil
}

var errWrite = errors.New("write log")

// skipWriter passes bytes on to w once more than delivered bytes of the
// current stream have been seen; earlier ones were delivered already.
type skipWriter struct {
	buf       [32 << 10]byte // copy buffer, reused for every frame
	w         io.Writer
	seen      int64 // bytes of the current stream so far
	delivered int64 // bytes written to w over all streams
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	start := s.seen
	s.seen += int64(n)
	if s.seen <= s.delivered {
		return n, nil
	}
	if skip := s.delivered - start; skip > 0 {
		p = p[skip:]
	}
	m, err := s.w.Write(p)
	s.delivered += int64(m)
	if err != nil {
		return n, fmt.Errorf("%w: %w", errWrite, err)
	}
	return n, nil
}

// maxLine bounds a buffered line; a longer one is passed on in pieces.
const maxLine = 1 << 20

// lineWriter calls fn for each complete line written to it.
type lineWriter struct {
	fn  func([]byte) error
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			if len(l.buf) >= maxLine {
				return n, l.flush()
			}
			return n, nil
		}
		line := p[:i]
		if len(l.buf) > 0 {
			line = append(l.buf, line...)
		}
		if err := l.fn(line); err != nil {
			return 0, err
		}
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineWriter) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	err := l.fn(l.buf)
	l.buf = l.buf[:0]
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
