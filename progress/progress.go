// Package progress shows a standalone step's events (runner.Event) as
// they happen: lines for a person, coloured on a terminal, or one JSON
// object or logfmt line per event for a log collector.
package progress

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"

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

// Formats lists the choices of New's format.
const Formats = "auto, text, json or logfmt"

// New returns the sink that shows events on w in format: auto (text,
// coloured when w is a terminal and noColor is false), text, json or
// logfmt. Any other format is an error that names the choices.
func New(w io.Writer, format string, noColor bool) (runner.Sink, error) {
	render, err := renderer(format, func() bool { return !noColor && IsTerminal(w) })
	if err != nil {
		return nil, err
	}
	return &console{w: w, render: render}, nil
}

// renderer returns the function that renders events in format; colour
// says, for auto only, whether to colour them.
func renderer(format string, colour func() bool) (func(*bytes.Buffer, runner.Event), error) {
	switch format {
	case "", "auto":
		if colour() {
			return appendColour, nil
		}
		return appendText, nil
	case "text":
		return appendText, nil
	case "json":
		return appendJSON, nil
	case "logfmt":
		return appendLogfmt, nil
	}
	return nil, fmt.Errorf("want %s", Formats)
}

// IsTerminal reports whether w is a terminal. It asks through the file's
// raw connection, which, unlike Fd, leaves the file's mode alone.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	tty := false
	if err := rc.Control(func(fd uintptr) { tty = term.IsTerminal(int(fd)) }); err != nil {
		return false
	}
	return tty
}

// console renders each event and writes it to w in one Write, under one
// lock: backends emit from their own goroutines, and their lines must not
// interleave.
type console struct {
	mu     sync.Mutex
	w      io.Writer
	render func(*bytes.Buffer, runner.Event)
	buf    bytes.Buffer
}

var _ runner.Sink = (*console)(nil)

// Event writes e. A console that cannot be written to loses the line and
// the step goes on: nobody is left to tell.
func (c *console) Event(e runner.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Reset()
	c.render(&c.buf, e)
	_, _ = c.w.Write(c.buf.Bytes())
}

// tagWidth is the width of the tag column of the text format.
const tagWidth = 10

// appendText renders e for a person: "[  12.3s] tag        text", a
// result's metadata below it, one key and value a line.
func appendText(b *bytes.Buffer, e runner.Event) {
	tag, text := textOf(e)
	fmt.Fprintf(b, "[%7.1fs] %-*s %s\n", e.Elapsed.Seconds(), tagWidth, tag, text)
	appendResultAttrs(b, e)
}

// appendColour is appendText on a terminal: the elapsed time dimmed, the
// tag coloured by the event's kind.
func appendColour(b *bytes.Buffer, e runner.Event) {
	tag, text := textOf(e)
	fmt.Fprintf(b, "%s[%7.1fs]%s %s%-*s %s%s\n",
		ansiDim, e.Elapsed.Seconds(), ansiReset, tagColour(e.Kind), tagWidth, tag, ansiReset, text)
	appendResultAttrs(b, e)
}

// tagColour is the colour of a kind's tag: done green, failed red,
// warnings yellow, the rest cyan.
func tagColour(k runner.EventKind) string {
	switch k {
	case runner.KindDone:
		return ansiBold + ansiGreen
	case runner.KindFailed:
		return ansiBold + ansiRed
	case runner.KindWarning:
		return ansiYellow
	}
	return ansiCyan
}

// textOf returns the tag and text of e's line: the phase for raystep's
// notes ("run !" for a warning), else the kind; a driver's log message
// starts with its level.
func textOf(e runner.Event) (tag, text string) {
	switch e.Kind {
	case runner.KindNote:
		return string(e.Phase), e.Message
	case runner.KindWarning:
		return string(e.Phase) + " !", e.Message
	case runner.KindLog:
		level := "INFO"
		if l := attr(e, "level"); l != "" {
			level = strings.ToUpper(l)
		}
		return string(e.Kind), level + " " + e.Message
	}
	return string(e.Kind), e.Message
}

// appendResultAttrs lists a result's metadata under its line, the values
// aligned after the widest key.
func appendResultAttrs(b *bytes.Buffer, e runner.Event) {
	if e.Kind != runner.KindResult {
		return
	}
	width := 0
	for _, a := range e.Attrs {
		width = max(width, len(a.Key))
	}
	for _, a := range e.Attrs {
		fmt.Fprintf(b, "%*s%-*s  %s\n", tagEnd, "", width, a.Key, a.Value)
	}
}

// tagEnd is where a line's text starts: "[%7.1fs] " and the tag column.
const tagEnd = 10 + 1 + tagWidth + 1

// attr returns the value of e's first attribute named key, "" if none.
func attr(e runner.Event, key string) string {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}
