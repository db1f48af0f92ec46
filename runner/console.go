package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// render shows a driver's Pipes message to a person (standalone runs).
func (s *state) render(m Message) {
	if s.r.Progress == nil {
		return
	}
	var p map[string]json.RawMessage
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case methodLog:
		level := text(p["level"])
		if level == "" {
			level = "INFO"
		}
		s.progress("log", strings.ToUpper(level)+" "+text(p["message"]))
	case methodCheck:
		s.progress("check", checkLine(p))
	case methodCustom:
		s.progress("message", compact(p["payload"], 300))
	case methodExternalStream:
		w := s.r.Stdout
		if text(p["stream"]) == "stderr" {
			w = s.r.Progress
		}
		_, _ = io.WriteString(w, text(p["text"]))
	default:
		s.progress("message", m.Method+" "+compact(m.Params, 300))
	}
}

// checkLine describes an asset check result.
func checkLine(p map[string]json.RawMessage) string {
	var passed bool
	_ = json.Unmarshal(p["passed"], &passed)
	verdict := "passed"
	if !passed {
		verdict = "FAILED (" + text(p["severity"]) + ")"
	}
	line := fmt.Sprintf("%s on %s: %s", text(p["check_name"]), text(p["asset_key"]), verdict)
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["metadata"], &meta) == nil && len(meta) > 0 {
		parts := make([]string, 0, len(meta))
		for _, k := range slices.Sorted(maps.Keys(meta)) {
			parts = append(parts, k+"="+metaText(meta[k]))
		}
		line += " [" + strings.Join(parts, " ") + "]"
	}
	return line
}

// renderMaterialization lists a materialization's metadata, one per line.
func (s *state) renderMaterialization(mat materialization) {
	if s.r.Progress == nil {
		return
	}
	head := mat.AssetKey
	if mat.DataVersion != nil {
		head += " (data version " + *mat.DataVersion + ")"
	}
	s.progress("result", head)
	keys := slices.Sorted(maps.Keys(mat.Metadata))
	width := 0
	for _, k := range keys {
		width = max(width, len(k))
	}
	for _, k := range keys {
		fmt.Fprintf(s.r.Progress, "%22s%-*s  %s\n", "", width, k, metaText(mat.Metadata[k]))
	}
}

// metaText shows a metadata value's raw value.
func metaText(raw json.RawMessage) string {
	var v struct {
		RawValue json.RawMessage `json:"raw_value"`
	}
	if json.Unmarshal(raw, &v) != nil || v.RawValue == nil {
		return compact(raw, 120)
	}
	if t := text(v.RawValue); t != "" {
		return t
	}
	return compact(v.RawValue, 120)
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
