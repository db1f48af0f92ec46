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
)

// errTerminal is the cause a status poll ends the tail with.
var errTerminal = errors.New("job is terminal")

// tail follows the websocket tail while the job runs. nil means the job is
// terminal: the stream ended normally, or a status poll said so.
func (f *follower) tail(ctx context.Context) error {
	tctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var frames atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.poll(tctx, stop, &frames)
	}()
	err := f.tailOnce(tctx, stop, &frames)
	stop(nil)
	<-done
	var te *tryError
	switch cause := context.Cause(tctx); {
	case ctx.Err() != nil:
		return err
	case errors.Is(cause, errTerminal):
		return nil
	case errors.As(cause, &te):
		return cause
	}
	return err
}

// Ray tells a job's end only through its status: its log tail ends one
// to two seconds later (the dashboard looks at the log file once a
// second). So Follow asks for the status often while the job's driver is
// young and less often as it ages: it waits 1/pollShare of the time the
// driver has run, at least minPoll and at most PollInterval. A job's end is
// noticed within about a quarter of a percent of its run time, tens of
// milliseconds for a short one, while a long one costs the dashboard one
// request a PollInterval, as a fixed poll would.
//
// A PENDING job has no driver yet: Ray is starting the job's supervisor
// (about a second on an idle head) or building its runtime environment
// (minutes, for a pip install). It can only fail or start from there, so
// Follow asks every pendingPoll at least, counting the job's age from when
// Follow began; the driver's age counts from the first poll that saw the
// job past PENDING. A driver that runs for pendingPoll or longer is seen
// running before it ends, and its end within minPoll.
const (
	minPoll     = 50 * time.Millisecond
	pendingPoll = 100 * time.Millisecond
	pollShare   = 200
)

// nextPoll is how long poll waits before it asks again.
func (f *follower) nextPoll() time.Duration {
	floor, since := pendingPoll, f.start
	if !f.running.IsZero() {
		floor, since = minPoll, f.running
	}
	return min(max(time.Since(since)/pollShare, floor), max(f.c.PollInterval, floor))
}

// saw records a status a poll read: the first one past PENDING starts the
// driver's clock (nextPoll). An unknown status ("") changes nothing.
func (f *follower) saw(st Status) {
	if f.running.IsZero() && st != "" && st != StatusPending {
		f.running = time.Now()
	}
}

// poll asks for the job's status while the tail runs (nextPoll). It ends
// the tail (stop) when the job is terminal, and when a poll fails while no
// frame arrived meanwhile: the dashboard stopped answering, even if the
// stream's connection still stands.
func (f *follower) poll(ctx context.Context, stop context.CancelCauseFunc, frames *atomic.Int64) {
	timer := time.NewTimer(f.nextPoll())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		before := frames.Load()
		st, err := f.status(ctx)
		var te *tryError
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && st.Terminal():
			stop(errTerminal)
			return
		case errors.As(err, &te) && frames.Load() == before:
			stop(te)
			return
		}
		f.saw(st)
		timer.Reset(f.nextPoll())
	}
}

// tailOnce reads one websocket connection to its end: nil when the server
// closed it normally and the job is terminal.
func (f *follower) tailOnce(ctx context.Context, stop context.CancelCauseFunc, frames *atomic.Int64) error {
	conn, err := f.dial(ctx, stop)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	f.answered()
	conn.SetReadLimit(-1)
	f.sw.seen = 0
	for {
		_, r, err := conn.Reader(ctx)
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			return f.closed(ctx)
		}
		if err != nil {
			return &tryError{err: fmt.Errorf("read log tail: %w", err), start: time.Now(), drop: true}
		}
		frames.Add(1)
		if _, err := io.CopyBuffer(f.sw, r, f.sw.buf[:]); err != nil {
			if errors.Is(err, errWrite) {
				return err
			}
			return &tryError{err: fmt.Errorf("read log tail: %w", err), start: time.Now(), drop: true}
		}
	}
}

// closed checks the job's status after the server ended the tail: Ray ends
// it when the job is terminal; otherwise it is a dropped stream.
func (f *follower) closed(ctx context.Context) error {
	st, err := f.status(ctx)
	switch {
	case err != nil:
		return err
	case !st.Terminal():
		return &tryError{err: errors.New("log tail closed while the job runs"), start: time.Now(), drop: true}
	}
	return nil
}

// dial opens the websocket tail; stop ends the tail if the handshake hears
// nothing for AttemptTimeout.
func (f *follower) dial(ctx context.Context, stop context.CancelCauseFunc) (*websocket.Conn, error) {
	start := time.Now()
	u, err := url.Parse(f.c.BaseURL + "/api/jobs/" + url.PathEscape(f.id) + "/logs/tail")
	if err != nil {
		return nil, fmt.Errorf("tail URL: %w", err)
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	header := http.Header{}
	f.c.setHeaders(header)
	dog := newWatchdog(f.c.AttemptTimeout, stop)
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient: f.c.HTTP.HTTPClient,
		HTTPHeader: header,
	})
	dog.stop()
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err == nil {
		return conn, nil
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		serr := fmt.Errorf("open log tail: %w", f.c.statusError(http.MethodGet, u.Path, resp))
		if retryableStatus(resp) {
			return nil, &tryError{err: serr, start: start}
		}
		return nil, serr
	}
	return nil, f.failure(ctx, start, fmt.Errorf("open log tail: %w", err))
}

// catchUp streams the full log and writes what the tail did not deliver.
func (f *follower) catchUp(ctx context.Context) error {
	resp, err := f.get(ctx, "/api/jobs/"+url.PathEscape(f.id)+"/logs")
	if err != nil {
		return fmt.Errorf("get full log: %w", err)
	}
	defer resp.Body.Close()
	f.sw.seen = 0
	err = decodeLogs(resp.Body, f.sw)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("read full log: %w", err)
	if wb, ok := resp.Body.(*watchedBody); ok && wb.readErr != nil && !errors.Is(err, errWrite) {
		return &tryError{err: f.c.redact(err), start: time.Now(), drop: true}
	}
	return err
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
