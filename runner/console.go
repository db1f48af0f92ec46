package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// render tells a person a driver's Pipes message (standalone runs): logs,
// checks and other messages become events; log_external_stream text goes
// to Stdout or Stderr as it came.
func (s *state) render(m *pipes.Message) {
	switch m.Method {
	case pipes.MethodLog:
		var p struct {
			Message string `json:"message"`
			Level   any    `json:"level"`
		}
		_ = json.Unmarshal(m.Params, &p)
		level := "INFO"
		if l, ok := p.Level.(string); ok && l != "" {
			level = strings.ToUpper(l)
		}
		s.emit(Event{Phase: PhaseRun, Kind: KindLog, Message: p.Message, Attrs: []Attr{{Key: "level", Value: level}}})
	case pipes.MethodReportAssetCheck:
		s.emit(Event{Phase: PhaseRun, Kind: KindCheck, Message: checkLine(m)})
	case pipes.MethodReportCustomMessage:
		var p struct {
			Payload json.RawMessage `json:"payload"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.emit(Event{Phase: PhaseRun, Kind: KindMessage, Message: compact(p.Payload, 300)})
	case pipes.MethodLogExternalStream:
		var p struct{ Stream, Text string }
		_ = json.Unmarshal(m.Params, &p)
		w := s.r.Stdout
		if p.Stream == "stderr" {
			w = s.r.Stderr
		}
		_, _ = io.WriteString(w, p.Text)
	default:
		s.emit(Event{Phase: PhaseRun, Kind: KindMessage, Message: string(m.Method) + " " + compact(m.Params, 300)})
	}
}

// checkLine describes an asset check result.
func checkLine(m *pipes.Message) string {
	c, _ := m.AssetCheck()
	verdict := "passed"
	if !c.Passed {
		verdict = "FAILED (" + string(c.Severity) + ")"
	}
	line := fmt.Sprintf("%s on %s: %s", c.CheckName, c.AssetKey, verdict)
	if len(c.Metadata) > 0 {
		parts := make([]string, 0, len(c.Metadata))
		for _, k := range sortedKeys(c.Metadata) {
			parts = append(parts, k+"="+metaText(c.Metadata[k]))
		}
		line += " [" + strings.Join(parts, " ") + "]"
	}
	return line
}

// renderMaterialization tells a materialization as a result event whose
// attributes are its metadata, in key order.
func (s *state) renderMaterialization(mat pipes.Materialization) {
	head := mat.AssetKey
	if mat.DataVersion != "" {
		head += " (data version " + mat.DataVersion + ")"
	}
	keys := sortedKeys(mat.Metadata)
	attrs := make([]Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, Attr{Key: k, Value: metaText(mat.Metadata[k])})
	}
	s.emit(Event{Phase: PhaseReport, Kind: KindResult, Message: head, Attrs: attrs})
}

// metaText shows a metadata value's raw value.
func metaText(v pipes.MetadataValue) string {
	if t := text(v.Raw); t != "" {
		return t
	}
	return compact(v.Raw, 120)
}

// text returns raw as a string when it is a JSON string.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// compact returns raw as compact JSON, cut at n bytes.
func compact(raw json.RawMessage, n int) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return truncate(string(raw), n)
	}
	return truncate(b.String(), n)
}
