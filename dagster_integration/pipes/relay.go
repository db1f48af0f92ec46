package pipes

import (
	"bytes"
	"fmt"
	"io"
)

// DefaultMaxLine is the line-length cap of a Relay built without one.
const DefaultMaxLine = 4 << 20

// Relay splits a child's output stream into plain lines and Pipes messages.
//
// Plain lines go to Out byte for byte (invalid UTF-8 included), in the order
// they came, batched into as few writes as possible. A line that is a Pipes
// message (a JSON object with "__dagster_pipes_version", as the Python
// dagster-pipes stdio writer prints) is parsed, validated and passed to
// OnMessage instead of Out. A line that claims to be a Pipes message but
// does not validate is passed to Out as plain text and reported to OnWarning,
// so no line is ever lost.
//
// Memory is bounded by MaxLine: at most one partial line of MaxLine bytes is
// held between writes. A line longer than MaxLine is passed to Out in chunks
// as it arrives and is never parsed; if its beginning looks like a Pipes
// message, OnWarning is told that the message was passed through as text.
//
// A Relay is an io.Writer; call Flush at the end of the stream for a last
// line without a newline. It is not safe for concurrent use.
type Relay struct {
	// Out receives plain output.
	Out io.Writer
	// OnMessage receives each valid Pipes message. An error it returns is
	// returned by Write.
	OnMessage func(*Message) error
	// OnWarning, if set, receives a description of each line that looked
	// like a Pipes message but was passed through as plain text.
	OnWarning func(string)
	// MaxLine is the longest line, newline included, that is held in memory
	// and parsed; zero means DefaultMaxLine.
	MaxLine int

	carry []byte
	long  bool
}

var versionToken = []byte(`"` + versionKey + `"`)

// Write consumes p. It returns len(p) unless Out or OnMessage failed.
func (r *Relay) Write(p []byte) (int, error) {
	n := len(p)
	if r.long {
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			return r.plain(p, n)
		}
		if _, err := r.plain(p[:nl+1], n); err != nil {
			return 0, err
		}
		r.long = false
		p = p[nl+1:]
	}
	if len(r.carry) > 0 {
		rest, err := r.completeCarry(p)
		if err != nil {
			return 0, err
		}
		p = rest
	}
	return n, r.scan(p)
}

func (r *Relay) max() int {
	if r.MaxLine <= 0 {
		return DefaultMaxLine
	}
	return r.MaxLine
}

func (r *Relay) plain(b []byte, n int) (int, error) {
	if len(b) == 0 {
		return n, nil
	}
	if _, err := r.Out.Write(b); err != nil {
		return 0, fmt.Errorf("relay plain output: %w", err)
	}
	return n, nil
}

// completeCarry extends the held partial line with the start of p and
// returns what is left of p.
func (r *Relay) completeCarry(p []byte) ([]byte, error) {
	nl := bytes.IndexByte(p, '\n')
	seg := p
	if nl >= 0 {
		seg = p[:nl+1]
	}
	if len(r.carry)+len(seg) > r.max() {
		r.warnLong(r.carry)
		if _, err := r.plain(r.carry, 0); err != nil {
			return nil, err
		}
		r.carry = r.carry[:0]
		if _, err := r.plain(seg, 0); err != nil {
			return nil, err
		}
		r.long = nl < 0
		return p[len(seg):], nil
	}
	r.carry = append(r.carry, seg...)
	if nl < 0 {
		return nil, nil
	}
	err := r.line(r.carry)
	r.carry = r.carry[:0]
	return p[len(seg):], err
}

// scan handles the complete lines of p and holds its tail.
func (r *Relay) scan(p []byte) error {
	i, runStart := 0, 0
	for {
		nl := bytes.IndexByte(p[i:], '\n')
		if nl < 0 {
			break
		}
		end := i + nl + 1
		if candidate(p[i:end]) {
			if _, err := r.plain(p[runStart:i], 0); err != nil {
				return err
			}
			if err := r.line(p[i:end]); err != nil {
				return err
			}
			runStart = end
		}
		i = end
	}
	if _, err := r.plain(p[runStart:i], 0); err != nil {
		return err
	}
	return r.hold(p[i:])
}

func (r *Relay) hold(tail []byte) error {
	if len(tail) == 0 {
		return nil
	}
	if len(tail) > r.max() {
		r.warnLong(tail)
		r.long = true
		_, err := r.plain(tail, 0)
		return err
	}
	r.carry = append(r.carry, tail...)
	return nil
}

// candidate is the cheap test run on every line: first non-blank byte '{'
// and the protocol key somewhere in it.
func candidate(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t', '\r':
			continue
		case '{':
			return bytes.Contains(line, versionToken)
		}
		return false
	}
	return false
}

// looksLikeMessage tells whether the start of an over-long line is, or may
// be, a Pipes message: '{' then the protocol key, or the beginning of it
// (Python's writer puts that key first).
func looksLikeMessage(head []byte) bool {
	head = bytes.TrimLeft(head, " \t\r")
	if len(head) == 0 || head[0] != '{' {
		return false
	}
	if bytes.Contains(head, versionToken) {
		return true
	}
	rest := bytes.TrimLeft(head[1:], " \t\r\n")
	return bytes.HasPrefix(versionToken, rest)
}

// line handles one complete line (newline included, if any).
func (r *Relay) line(b []byte) error {
	if !candidate(b) {
		_, err := r.plain(b, 0)
		return err
	}
	if len(b) > r.max() {
		r.warnLong(b)
		_, err := r.plain(b, 0)
		return err
	}
	msg, ok, err := ParseMessage(b)
	if !ok {
		if looksLikeMessage(b) {
			r.warn("pipes relay: passed a line that starts like a Pipes message but is not a JSON object through as text")
		}
		_, werr := r.plain(b, 0)
		return werr
	}
	if err != nil {
		r.warn(fmt.Sprintf("pipes relay: passed an invalid Pipes message through as text: %v", err))
		_, werr := r.plain(b, 0)
		return werr
	}
	if r.OnMessage == nil {
		return nil
	}
	if err := r.OnMessage(msg); err != nil {
		return fmt.Errorf("relay %s message: %w", msg.Method, err)
	}
	return nil
}

func (r *Relay) warnLong(head []byte) {
	if looksLikeMessage(head) {
		r.warn(fmt.Sprintf("pipes relay: a Pipes message longer than %d bytes was passed through as text", r.max()))
	}
}

func (r *Relay) warn(s string) {
	if r.OnWarning != nil {
		r.OnWarning(s)
	}
}

// Flush handles a final line that has no newline. Call it at end of stream.
func (r *Relay) Flush() error {
	r.long = false
	if len(r.carry) == 0 {
		return nil
	}
	err := r.line(r.carry)
	r.carry = r.carry[:0]
	return err
}

// ReadFrom relays all of src, then flushes.
func (r *Relay) ReadFrom(src io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			total += int64(n)
			if _, werr := r.Write(buf[:n]); werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, r.Flush()
		}
		if err != nil {
			return total, fmt.Errorf("relay read: %w", err)
		}
	}
}
