package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/raystep/raystep/runner"
)

// ANSI colours of the progress output.
const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// colorWriter colours the runner's progress lines, "[  12.3s] tag  text":
// the elapsed time dimmed, the tag by what it says (done green, failed
// red, warnings yellow, the rest cyan). The runner writes one line per
// call; anything else passes through unchanged.
type colorWriter struct{ w io.Writer }

// tagEnd ends the runner's "[%7.1fs] %-10s " prefix: 10 + 1 + 10 + 1.
const tagEnd = 22

func (c *colorWriter) Write(p []byte) (int, error) {
	if len(p) <= tagEnd || p[0] != '[' || p[9] != ']' {
		return c.w.Write(p)
	}
	tag := bytes.TrimSpace(p[11:tagEnd])
	color := ansiCyan
	switch {
	case bytes.Equal(tag, []byte("done")):
		color = ansiBold + ansiGreen
	case bytes.Equal(tag, []byte("failed")):
		color = ansiBold + ansiRed
	case bytes.HasSuffix(tag, []byte("!")):
		color = ansiYellow
	}
	var b bytes.Buffer
	b.Grow(len(p) + 24)
	b.WriteString(ansiDim)
	b.Write(p[:10])
	b.WriteString(ansiReset + " " + color)
	b.Write(p[11:tagEnd])
	b.WriteString(ansiReset)
	b.Write(p[tagEnd:])
	if _, err := c.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// console is where a person reads the step's progress: w (stderr),
// coloured when it is a terminal.
func (a *app) console() io.Writer { return a.consoleOn(a.stderr) }

// consoleOn is console for the stream w.
func (a *app) consoleOn(w io.Writer) io.Writer {
	if a.cfg.NoColor == "" && isTerminal(w) {
		return &colorWriter{w: w}
	}
	return w
}

// eventSink renders the step's events for a person reading w: one line per
// event, "[elapsed] tag text", coloured on a terminal.
func (a *app) eventSink(w io.Writer) runner.Sink {
	return &textRenderer{w: a.consoleOn(w)}
}

// textRenderer writes each event as one progress line with the elapsed
// time; a result's metadata follows, one entry per line. The tag is the
// phase ("phase !" for a warning), or the kind for the step's end and the
// driver's reports.
type textRenderer struct {
	mu sync.Mutex
	w  io.Writer
}

// Event writes e.
func (t *textRenderer) Event(e runner.Event) {
	tag, msg := string(e.Kind), e.Message
	switch e.Kind {
	case runner.KindNote:
		tag = string(e.Phase)
	case runner.KindWarning:
		tag = string(e.Phase) + " !"
	case runner.KindLog:
		msg = attrValue(e.Attrs, "level") + " " + msg
	}
	lines := []string{fmt.Sprintf("[%7.1fs] %-10s %s\n", e.Elapsed.Seconds(), tag, msg)}
	if e.Kind == runner.KindResult {
		width := 0
		for _, at := range e.Attrs {
			width = max(width, len(at.Key))
		}
		for _, at := range e.Attrs {
			lines = append(lines, fmt.Sprintf("%22s%-*s  %s\n", "", width, at.Key, at.Value))
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range lines { // one write per line: colorWriter colours lines
		_, _ = io.WriteString(t.w, l)
	}
}

// attrValue returns the value of the attribute key, "" without one.
func attrValue(attrs []runner.Attr, key string) string {
	for _, at := range attrs {
		if at.Key == key {
			return at.Value
		}
	}
	return ""
}
