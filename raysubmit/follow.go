package raysubmit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"
)

// ErrUnreachable means the dashboard did not answer for Client.MaxOutage
// while Follow followed a log.
var ErrUnreachable = errors.New("dashboard not answering")

// Outage describes a dashboard that stopped answering while Follow
// follows a log.
type Outage struct {
	// For is how long the dashboard has not answered.
	For time.Duration
	// Limit is how long Follow keeps trying in all (Client.MaxOutage).
	Limit time.Duration
	// Err is the last failure; nil once the dashboard answers again.
	Err error
}

// Follow copies the job's log to w as it is written, until the job is
// terminal and its log complete, and returns the number of bytes written.
//
// It reads /api/jobs/{id}/logs/tail over a websocket. Ray's tail endpoint
// replays the log file from its first byte on every connection, so Follow
// counts the bytes it has delivered and, after a dropped connection,
// reconnects and discards that many bytes before writing again: no byte is
// repeated or skipped. Once the job is terminal (the tail ends, or a status
// poll says so) Follow reads the full log once,
// streaming it, and writes whatever the tail has not delivered: the tail
// can miss the end of the log, and it sends ten lines per frame, so a
// finished job's backlog comes much faster this way. Memory use does not
// grow with the log.
//
// Follow is the one retry layer of following a log: its own requests (the
// status, the websocket handshake, the full log) are single tries without
// the Client's retry policy, each failed when the dashboard says nothing
// for AttemptTimeout. A failed try or a dropped stream is tried again after
// ReconnectWait, doubling while tries keep failing, up to eight times
// ReconnectWait. A failed poll while the stream is silent counts as a
// failed try, so a hung dashboard is noticed too. Any answer from the
// dashboard ends an outage; while one lasts, onOutage (when not nil) is
// called from Follow's goroutine after each failed request, and once with a
// nil Err when the dashboard answers again.
//
// Worst case: Follow gives up, with an error wrapping ErrUnreachable,
// MaxOutage after the start of the first try that failed; that try starts
// at most PollInterval after the dashboard stopped answering (at once when
// its connection closes). With the defaults a dead dashboard ends Follow
// within 1s + 3m.
func (c *Client) Follow(ctx context.Context, id string, w io.Writer, onOutage func(Outage)) (int64, error) {
	f := &follower{c: c, id: id, sw: &skipWriter{w: w}, onOutage: onOutage, start: time.Now()}
	for {
		err := f.try(ctx)
		if err == nil {
			f.answered()
			return f.sw.delivered, nil
		}
		var te *tryError
		switch {
		case ctx.Err() != nil:
			err = context.Cause(ctx)
		case errors.As(err, &te):
			if err = f.again(ctx, te); err == nil {
				continue
			}
		}
		return f.sw.delivered, fmt.Errorf("follow logs of job %s: %w", id, err)
	}
}

// FollowLines is Follow with a callback per log line (without its newline).
// A last line without a newline is passed too. An error from fn stops the
// stream and is returned.
func (c *Client) FollowLines(ctx context.Context, id string, fn func(line []byte) error, onOutage func(Outage)) error {
	lw := &lineWriter{fn: fn}
	if _, err := c.Follow(ctx, id, lw, onOutage); err != nil {
		return err
	}
	return lw.flush()
}

// follower is one Follow call: how far the log was delivered and, while
// the dashboard does not answer, since when.
type follower struct {
	c        *Client
	id       string
	sw       *skipWriter
	onOutage func(Outage)
	down     time.Time // start of the current outage; zero while the dashboard answers
	last     error     // the outage's last failure
	reported bool      // onOutage heard of the current outage
	fails    int       // tries in a row that delivered nothing, for the backoff
	start    time.Time // when Follow began, about when the job was submitted
	running  time.Time // when a poll first saw the job past PENDING; zero before
}

// tryError is a failed try of Follow that another try may cure: the
// dashboard did not answer (a connection error, a silence, a retryable
// status) or a stream broke.
type tryError struct {
	err   error
	start time.Time // when the failed try began
	drop  bool      // a stream the dashboard had answered broke
}

func (e *tryError) Error() string { return e.err.Error() }
func (e *tryError) Unwrap() error { return e.err }

// errOutageOver cuts a try at the end of the outage budget.
var errOutageOver = errors.New("outage budget spent")

// try follows the log once: the job's status, its tail while it runs, then
// what the tail missed. nil means the whole log was delivered.
func (f *follower) try(ctx context.Context) error {
	if !f.down.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, f.down.Add(f.c.MaxOutage), errOutageOver)
		defer cancel()
	}
	before := f.sw.delivered
	st, err := f.status(ctx)
	if err != nil {
		return err
	}
	f.answered()
	f.saw(st)
	if !st.Terminal() {
		err = f.tail(ctx)
	}
	if err == nil {
		err = f.catchUp(ctx)
	}
	if f.sw.delivered > before {
		f.fails = 0
	}
	return err
}

// again records a failed try and waits before the next one, or gives up
// when the outage budget is spent.
func (f *follower) again(ctx context.Context, te *tryError) error {
	if f.down.IsZero() {
		f.down = te.start
	}
	since := time.Since(f.down)
	if f.last == nil || since < f.c.MaxOutage {
		f.last = te.err // not the cut at the budget's end, which says nothing new
	}
	if since >= f.c.MaxOutage {
		return fmt.Errorf("%w for %s (%s): %w", ErrUnreachable, f.c.MaxOutage, redactURL(f.c.BaseURL), f.last)
	}
	f.fails++
	wait := min(f.c.ReconnectWait<<min(f.fails-1, 3), f.c.MaxOutage-since)
	if te.drop {
		f.c.Logger.Debug("log stream dropped; reconnecting", zap.String("job", f.id),
			zap.Int64("delivered_bytes", f.sw.delivered), zap.Duration("wait", wait), zap.Error(te.err))
	} else {
		f.c.Logger.Debug("dashboard did not answer; trying again", zap.String("job", f.id),
			zap.Duration("for", since), zap.Duration("wait", wait), zap.Error(te.err))
		f.reported = f.onOutage != nil
		if f.reported {
			f.onOutage(Outage{For: since, Limit: f.c.MaxOutage, Err: te.err})
		}
	}
	return sleepCtx(ctx, wait)
}

// answered ends an outage: the dashboard answered.
func (f *follower) answered() {
	if f.down.IsZero() {
		return
	}
	since := time.Since(f.down)
	if f.reported {
		f.onOutage(Outage{For: since, Limit: f.c.MaxOutage})
	}
	f.c.Logger.Debug("dashboard answers again", zap.String("job", f.id), zap.Duration("after", since))
	f.down, f.last, f.reported = time.Time{}, nil, false
}

// status asks once for the job's status. A refusal other than "not found"
// leaves the status unknown ("", nil): the tail's handshake then meets the
// same refusal and reports it.
func (f *follower) status(ctx context.Context) (Status, error) {
	resp, err := f.get(ctx, "/api/jobs/"+url.PathEscape(f.id))
	var te *tryError
	var apiErr *APIError
	switch {
	case errors.As(err, &te):
		return "", &tryError{err: fmt.Errorf("get job %s: %w", f.id, te.err), start: te.start}
	case errors.As(err, &apiErr):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("get job %s: %w", f.id, err)
	}
	defer resp.Body.Close()
	var d struct {
		Status Status `json:"status"` // only: decoding the whole details costs more than the request
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return "", &tryError{err: fmt.Errorf("get job %s: %w", f.id, err), start: time.Now()}
	}
	return d.Status, nil
}

// get sends one GET, without the retry policy, and returns a 200 answer
// whose body the caller closes. The try fails (a *tryError) when the
// dashboard says nothing for AttemptTimeout, headers and body alike, or
// when the Client's policy would have retried.
func (f *follower) get(ctx context.Context, path string) (*http.Response, error) {
	start := time.Now()
	actx, cancel := context.WithCancelCause(ctx)
	dog := newWatchdog(f.c.AttemptTimeout, cancel)
	req, err := f.c.newRequest(actx, http.MethodGet, path, nil)
	if err != nil {
		dog.stop()
		cancel(nil)
		return nil, err
	}
	resp, err := f.c.HTTP.HTTPClient.Do(req.Request)
	if err != nil {
		dog.stop()
		defer cancel(nil)
		return nil, f.failure(actx, start, err)
	}
	if resp.StatusCode != http.StatusOK {
		dog.stop()
		defer cancel(nil)
		defer resp.Body.Close()
		err := f.c.statusError(http.MethodGet, path, resp)
		if retryableStatus(resp) {
			return nil, &tryError{err: err, start: start}
		}
		return nil, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, dog: dog, done: cancel}
	return resp, nil
}

// failure makes a try's error a *tryError, with the watchdog's or the
// budget's word on why the try was cut, unless it is a certificate the
// Client refused: no other try would be accepted.
func (f *follower) failure(actx context.Context, start time.Time, err error) error {
	err = f.c.redact(err)
	if cause := context.Cause(actx); actx.Err() != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", cause, err)
	}
	if certificateError(err) {
		return err
	}
	return &tryError{err: err, start: start}
}

// watchdog cancels a try when the dashboard says nothing for d.
type watchdog struct {
	t *time.Timer
	d time.Duration
}

func newWatchdog(d time.Duration, cancel context.CancelCauseFunc) *watchdog {
	return &watchdog{d: d, t: time.AfterFunc(d, func() { cancel(fmt.Errorf("no answer within %s", d)) })}
}

// heard restarts the count.
func (w *watchdog) heard() { w.t.Reset(w.d) }

// stop ends the watch.
func (w *watchdog) stop() { w.t.Stop() }

// watchedBody is a response body read under a watchdog; a read error
// other than EOF is kept, to tell a broken answer from a malformed one.
type watchedBody struct {
	io.ReadCloser
	dog     *watchdog
	done    context.CancelCauseFunc
	readErr error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.dog.heard()
	if err != nil && err != io.EOF && b.readErr == nil {
		b.readErr = err
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.dog.stop()
	b.done(nil)
	return b.ReadCloser.Close()
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
