package progress

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/raystep/raystep/runner"
)

// The structured formats, for log collectors: one JSON object or one
// logfmt line per event, the time in RFC 3339 with milliseconds (UTC), the
// elapsed time in seconds rounded to the millisecond.

// timeFormat is RFC 3339 with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// jsonEvent is an event as a JSON object; the step's fields and the
// attributes appear only when set.
type jsonEvent struct {
	Time         string           `json:"time"`
	Elapsed      float64          `json:"elapsed_s"`
	Phase        runner.Phase     `json:"phase"`
	Kind         runner.EventKind `json:"kind"`
	Message      string           `json:"message"`
	Cluster      string           `json:"cluster,omitempty"`
	SubmissionID string           `json:"submission_id,omitempty"`
	DashboardURL string           `json:"dashboard_url,omitempty"`
	Attrs        jsonAttrs        `json:"attrs,omitempty"`
}

// jsonAttrs is an event's attributes as one JSON object, in their order.
type jsonAttrs []runner.Attr

// MarshalJSON writes the attributes as an object, keys in their order.
func (as jsonAttrs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, a := range as {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := appendJSONString(&b, a.Key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := appendJSONString(&b, a.Value); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// appendJSONString writes s as a JSON string, leaving <, > and & as they
// are (URLs stay readable).
func appendJSONString(b *bytes.Buffer, s string) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// appendJSON renders e as one line of JSON.
func appendJSON(b *bytes.Buffer, e runner.Event) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(jsonEvent{ // strings and a float: it cannot fail
		Time:         e.Time.UTC().Format(timeFormat),
		Elapsed:      e.Elapsed.Round(time.Millisecond).Seconds(),
		Phase:        e.Phase,
		Kind:         e.Kind,
		Message:      e.Message,
		Cluster:      e.Cluster,
		SubmissionID: e.SubmissionID,
		DashboardURL: e.DashboardURL,
		Attrs:        jsonAttrs(e.Attrs),
	})
}

// appendLogfmt renders e as one logfmt line: time, elapsed, phase, kind
// and msg always, the step's fields when set, then the attributes.
func appendLogfmt(b *bytes.Buffer, e runner.Event) {
	elapsed := strconv.FormatFloat(e.Elapsed.Round(time.Millisecond).Seconds(), 'f', 3, 64) + "s"
	pairs := []runner.Attr{
		{Key: "time", Value: e.Time.UTC().Format(timeFormat)},
		{Key: "elapsed", Value: elapsed},
		{Key: "phase", Value: string(e.Phase)},
		{Key: "kind", Value: string(e.Kind)},
		{Key: "msg", Value: e.Message},
	}
	for _, f := range []runner.Attr{
		{Key: "cluster", Value: e.Cluster},
		{Key: "submission_id", Value: e.SubmissionID},
		{Key: "dashboard_url", Value: e.DashboardURL},
	} {
		if f.Value != "" {
			pairs = append(pairs, f)
		}
	}
	for i, p := range append(pairs, e.Attrs...) {
		if i > 0 {
			b.WriteByte(' ')
		}
		appendLogfmtKey(b, p.Key)
		b.WriteByte('=')
		appendLogfmtValue(b, p.Value)
	}
	b.WriteByte('\n')
}

// appendLogfmtKey writes key with every character a key cannot hold
// (space, '=', '"', control characters, invalid UTF-8) replaced by '_'.
func appendLogfmtKey(b *bytes.Buffer, key string) {
	if key == "" {
		b.WriteByte('_')
		return
	}
	for _, r := range key {
		if needsQuote(r) {
			r = '_'
		}
		b.WriteRune(r)
	}
}

// appendLogfmtValue writes s bare when it can be, else in double quotes
// with '"', '\' and control characters escaped as in JSON.
func appendLogfmtValue(b *bytes.Buffer, s string) {
	bare := s != ""
	for _, r := range s {
		bare = bare && !needsQuote(r)
	}
	if bare {
		b.WriteString(s)
		return
	}
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s { // invalid UTF-8 comes as U+FFFD
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[r>>shift&0xf])
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// needsQuote reports whether r cannot stand in a bare logfmt key or value.
func needsQuote(r rune) bool {
	return r <= ' ' || r == '=' || r == '"' || r == utf8.RuneError ||
		unicode.IsControl(r) || unicode.IsSpace(r)
}
