package raysubmit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeLogs streams the "logs" string of Ray's {"logs": "..."} answer to
// w, unescaping as it goes, so a log of any size passes through a fixed
// buffer. Other members must be strings; they are skipped.
func decodeLogs(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := expect(br, '{'); err != nil {
		return err
	}
	for {
		c, err := nextNonSpace(br)
		if err != nil {
			return err
		}
		switch c {
		case '}':
			return bw.Flush()
		case ',':
			continue
		case '"':
		default:
			return fmt.Errorf("unexpected %q in logs answer", c)
		}
		var key bufferWriter
		if err := unquote(br, &key); err != nil {
			return err
		}
		if err := expect(br, ':'); err != nil {
			return err
		}
		if err := expect(br, '"'); err != nil {
			return errors.New("logs answer: member is not a string")
		}
		dst := io.Writer(io.Discard)
		if string(key) == "logs" {
			dst = bw
		}
		if err := unquote(br, dst); err != nil {
			return err
		}
	}
}

type bufferWriter []byte

func (b *bufferWriter) Write(p []byte) (int, error) {
	if len(*b)+len(p) > 256 {
		return 0, errors.New("logs answer: key too long")
	}
	*b = append(*b, p...)
	return len(p), nil
}

func nextNonSpace(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("logs answer: %w", noEOF(err))
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

func expect(br *bufio.Reader, want byte) error {
	c, err := nextNonSpace(br)
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("logs answer: got %q, want %q", c, want)
	}
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// unquote copies a JSON string body (after its opening quote) to w,
// consuming the closing quote.
func unquote(br *bufio.Reader, w io.Writer) error {
	var out [utf8.UTFMax]byte
	for {
		// Copy the run of plain bytes in one write.
		chunk, err := br.Peek(br.Buffered())
		if len(chunk) == 0 {
			_, err = br.Peek(1)
			if err != nil {
				return fmt.Errorf("logs answer: %w", noEOF(err))
			}
			continue
		}
		n := 0
		for n < len(chunk) && chunk[n] != '"' && chunk[n] != '\\' {
			n++
		}
		if n > 0 {
			if _, err := w.Write(chunk[:n]); err != nil {
				return err
			}
			_, _ = br.Discard(n)
			continue
		}
		c, _ := br.ReadByte()
		if c == '"' {
			return nil
		}
		r, err := unescape(br)
		if err != nil {
			return err
		}
		k := utf8.EncodeRune(out[:], r)
		if _, err := w.Write(out[:k]); err != nil {
			return err
		}
	}
}

// unescape reads one escape sequence after its backslash.
func unescape(br *bufio.Reader) (rune, error) {
	c, err := br.ReadByte()
	if err != nil {
		return 0, fmt.Errorf("logs answer: %w", noEOF(err))
	}
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := hex4(br)
		if err != nil || !utf16.IsSurrogate(r) {
			return r, err
		}
		if next, _ := br.Peek(2); string(next) != `\u` {
			return utf8.RuneError, nil
		}
		_, _ = br.Discard(2)
		r2, err := hex4(br)
		if err != nil {
			return 0, err
		}
		return utf16.DecodeRune(r, r2), nil
	}
	return 0, fmt.Errorf("logs answer: bad escape \\%c", c)
}

func hex4(br *bufio.Reader) (rune, error) {
	var r rune
	for range 4 {
		c, err := br.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("logs answer: %w", noEOF(err))
		}
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, fmt.Errorf("logs answer: bad \\u escape")
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}
