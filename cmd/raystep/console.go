package main

import (
	"bytes"
	"io"
	"os"
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
