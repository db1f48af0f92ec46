package pipes

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// channel is where messages go: one complete line per call.
type channel interface {
	writeLine(line []byte) error
	close() error
}

// fileChannel appends to the message file, one write(2) per message on an
// O_APPEND descriptor, so Dagster's tailing reader never sees half a line
// from us and concurrent writers do not interleave.
type fileChannel struct {
	mu sync.Mutex
	f  *os.File
}

func openFileChannel(path string) (*fileChannel, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open pipes message file: %w", err)
	}
	return &fileChannel{f: f}, nil
}

func (c *fileChannel) writeLine(line []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.f.Write(line); err != nil {
		return fmt.Errorf("write pipes message: %w", err)
	}
	return nil
}

func (c *fileChannel) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.f.Close(); err != nil {
		return fmt.Errorf("close pipes message file: %w", err)
	}
	return nil
}

// Stream is a line-aware, concurrency-safe writer on stdout or stderr. When
// the session writes its messages to the same stream, plain output written
// through the Stream and messages share one lock, and a message never starts
// in the middle of a plain line: if the plain output stopped mid-line, a
// newline is inserted first.
type Stream struct {
	mu      sync.Mutex
	w       io.Writer
	midLine bool
}

// NewStream wraps w.
func NewStream(w io.Writer) *Stream { return &Stream{w: w} }

// Write writes plain output.
func (s *Stream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.w.Write(p)
	if n > 0 {
		s.midLine = p[n-1] != '\n'
	}
	return n, err
}

func (s *Stream) writeLine(line []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.midLine {
		if _, err := s.w.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("write pipes message: %w", err)
		}
		s.midLine = false
	}
	if _, err := s.w.Write(line); err != nil {
		return fmt.Errorf("write pipes message: %w", err)
	}
	return nil
}

func (s *Stream) close() error { return nil }

// bufferedChannel holds every message until close, then writes them all
// (the "buffered_stdio" writer). Memory grows with the messages sent: that
// is what the orchestrator asked for.
type bufferedChannel struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out *Stream
}

func (c *bufferedChannel) writeLine(line []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(line)
	return nil
}

func (c *bufferedChannel) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.Len() == 0 {
		return nil
	}
	err := c.out.writeLine(c.buf.Bytes())
	c.buf.Reset()
	return err
}

// openChannel resolves message params to a channel.
func openChannel(p Params, stdout, stderr *Stream) (channel, error) {
	if path, ok, err := paramString(p, "path"); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return openFileChannel(path)
	}
	for _, key := range []string{"stdio", "buffered_stdio"} {
		name, ok, err := paramString(p, key)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		var s *Stream
		switch name {
		case "stdout":
			s = stdout
		case "stderr":
			s = stderr
		default:
			return nil, fmt.Errorf("%w: %q must be \"stdout\" or \"stderr\", got %q", ErrBootstrap, key, name)
		}
		if key == "stdio" {
			return s, nil
		}
		return &bufferedChannel{out: s}, nil
	}
	return nil, fmt.Errorf("%w: message params need \"path\", \"stdio\" or \"buffered_stdio\", got keys %v", ErrBootstrap, keys(p))
}
