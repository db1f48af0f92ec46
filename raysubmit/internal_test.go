package raysubmit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeLogs(t *testing.T) {
	big := strings.Repeat("line with \"quotes\", tabs\t and \\ backslashes é 日本 🚀\n", 5000)
	tests := []struct {
		name string
		logs string
	}{
		{name: "empty", logs: ""},
		{name: "plain", logs: "hello\nworld\n"},
		{name: "escapes", logs: "a\"b\\c/d\b\f\n\r\t\x01"},
		{name: "non-ascii", logs: "é 日本 🚀 \u2028"},
		{name: "large", logs: big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, ascii := range []bool{true, false} {
				body := pythonJSON(t, map[string]string{"logs": tt.logs}, ascii)
				var got bytes.Buffer
				if err := decodeLogs(iotest.OneByteReader(bytes.NewReader(body)), &got); err != nil {
					t.Fatalf("decodeLogs: %v", err)
				}
				if diff := cmp.Diff(tt.logs, got.String()); diff != "" {
					t.Errorf("ascii=%v (-want +got):\n%s", ascii, diff)
				}
			}
		})
	}
}

func TestDecodeLogsRejectsTruncated(t *testing.T) {
	if err := decodeLogs(strings.NewReader(`{"logs": "abc`), &bytes.Buffer{}); err == nil {
		t.Error("decodeLogs of a truncated answer: want an error")
	}
}

// pythonJSON encodes v as Python's json.dumps does: with ensure_ascii
// (the default) every non-ASCII rune is a \u escape, astral ones as
// surrogate pairs.
func pythonJSON(t *testing.T, v any, ascii bool) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !ascii {
		return b
	}
	var out bytes.Buffer
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			out.WriteString(strings.ToLower(jsonU(0xD800 + (r >> 10))))
			out.WriteString(jsonU(0xDC00 + (r & 0x3FF)))
		default:
			out.WriteString(jsonU(r))
		}
	}
	return out.Bytes()
}

func jsonU(r rune) string {
	const hex = "0123456789ABCDEF"
	return `\u` + string([]byte{hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF]})
}

func TestSkipWriterResumes(t *testing.T) {
	var out bytes.Buffer
	sw := &skipWriter{w: &out}
	stream := []string{"abc", "defg", "hij"}
	// First connection delivers "abcde" then drops.
	_, _ = sw.Write([]byte("abc"))
	_, _ = sw.Write([]byte("de"))
	// Reconnection replays from the start in different chunks.
	sw.seen = 0
	for _, s := range stream {
		_, _ = sw.Write([]byte(s))
	}
	// The final full log adds a missed tail.
	sw.seen = 0
	_, _ = sw.Write([]byte("abcdefghijk\n"))
	if diff := cmp.Diff("abcdefghijk\n", out.String()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if sw.delivered != 12 {
		t.Errorf("delivered = %d, want 12", sw.delivered)
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	lw := &lineWriter{fn: func(l []byte) error { got = append(got, string(l)); return nil }}
	for _, chunk := range []string{"one\ntw", "o\n", "", "thr", "ee\nfour"} {
		if _, err := lw.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := lw.flush(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"one", "two", "three", "four"}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestIgnoreRules(t *testing.T) {
	rules, err := excludeRules([]string{"# comment", "", "*.pyc", "/build", "data/", "!keep.pyc", "docs/**/*.md", "sub/x?.txt", `\#hash`})
	if err != nil {
		t.Fatal(err)
	}
	p, ok, err := parsePattern("secret.txt", []string{"pkg"})
	if err != nil || !ok {
		t.Fatalf("parsePattern = %v, %v", ok, err)
	}
	rules = append(rules, p)
	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{path: "a.pyc", want: true},
		{path: "deep/down/a.pyc", want: true},
		{path: "keep.pyc", want: false},
		{path: "build", isDir: true, want: true},
		{path: "src/build", isDir: true, want: false},
		{path: "data", isDir: true, want: true},
		{path: "data", isDir: false, want: false},
		{path: "src/data", isDir: true, want: true},
		{path: "docs/a/b/c.md", want: true},
		{path: "docs/c.md", want: true},
		{path: "sub/x1.txt", want: true},
		{path: "sub/x12.txt", want: false},
		{path: "pkg/secret.txt", want: true},
		{path: "secret.txt", want: false},
		{path: "main.py", want: false},
		{path: "#hash", want: true},
	}
	for _, tt := range tests {
		if got := rules.ignored(tt.path, tt.isDir); got != tt.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", tt.path, tt.isDir, got, tt.want)
		}
	}
}
