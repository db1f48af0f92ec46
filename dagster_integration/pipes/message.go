package pipes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Method is the "method" of a Pipes message.
type Method string

// The methods of the protocol.
const (
	MethodOpened              Method = "opened"
	MethodClosed              Method = "closed"
	MethodLog                 Method = "log"
	MethodReportMaterialize   Method = "report_asset_materialization"
	MethodReportAssetCheck    Method = "report_asset_check"
	MethodReportCustomMessage Method = "report_custom_message"
	MethodLogExternalStream   Method = "log_external_stream"
)

const versionKey = "__dagster_pipes_version"

// Message is one validated Pipes message. Messages come from ParseMessage (a
// line read from a child process) or NewMessage.
type Message struct {
	// Method is the message's method.
	Method Method
	// Params is the JSON of "params": an object, or null.
	Params json.RawMessage
	line   []byte
}

// Line returns the message as one JSON line without the newline. For a
// parsed message it is the received line (surrounding whitespace trimmed),
// so forwarding it changes nothing.
func (m *Message) Line() []byte { return m.line }

// ParseMessage parses and validates one line. ok is false (and err nil) when
// the line is not a Pipes message at all (not a JSON object, or no
// "__dagster_pipes_version" key), which a log-reading orchestrator treats as
// plain output. err wraps ErrInvalidMessage when the line is a Pipes message
// that Dagster's handler would reject.
func ParseMessage(line []byte) (msg *Message, ok bool, err error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, false, nil
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(line, &env) != nil {
		return nil, false, nil
	}
	if _, has := env[versionKey]; !has {
		return nil, false, nil
	}
	m, err := messageFromEnvelope(env)
	if err != nil {
		return nil, true, err
	}
	m.line = append([]byte(nil), line...)
	return m, true, nil
}

func messageFromEnvelope(env map[string]json.RawMessage) (*Message, error) {
	var method string
	if err := json.Unmarshal(env["method"], &method); err != nil {
		return nil, invalid("method must be a string")
	}
	var version string
	if err := json.Unmarshal(env[versionKey], &version); err != nil {
		return nil, invalid("%s must be a string", versionKey)
	}
	params, has := env["params"]
	if !has {
		return nil, invalid("%s: missing params", method)
	}
	m := &Message{Method: Method(method), Params: params}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// NewMessage builds and validates a message from method and params (any
// value that encodes to a JSON object, or nil).
func NewMessage(method Method, params any) (*Message, error) {
	var p json.RawMessage
	if params == nil {
		p = json.RawMessage("null")
	} else {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("%w: %s params: %w", ErrInvalidMessage, method, err)
		}
		p = b
	}
	m := &Message{Method: method, Params: p}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	mb, _ := json.Marshal(string(method))
	line := make([]byte, 0, len(p)+len(mb)+64)
	line = append(line, `{"`+versionKey+`": "`+ProtocolVersion+`", "method": `...)
	line = append(line, mb...)
	line = append(line, `, "params": `...)
	line = append(line, p...)
	m.line = append(line, '}')
	return m, nil
}

// Validate checks the params against what Dagster's message handler accepts
// for the method.
func (m *Message) Validate() error {
	v, err := decodeAny(m.Params)
	if err != nil {
		return invalid("%s: params: %v", m.Method, err)
	}
	params, isObj := v.(map[string]any)
	if v != nil && !isObj {
		return invalid("%s: params must be an object or null", m.Method)
	}
	if m.Method != MethodClosed && !isObj {
		return invalid("%s: params must be an object", m.Method)
	}
	switch m.Method {
	case MethodOpened:
		return nil
	case MethodClosed:
		if err := exactKeys(m.Method, params, nil, []string{"exception"}); err != nil {
			return err
		}
		if params["exception"] != nil {
			return validateException(params["exception"], 0)
		}
		return nil
	case MethodLog:
		return validateLog(params)
	case MethodReportMaterialize:
		if err := exactKeys(m.Method, params, []string{"asset_key", "data_version", "metadata"}, nil); err != nil {
			return err
		}
		if err := wantString(m.Method, params, "asset_key", false); err != nil {
			return err
		}
		if err := wantString(m.Method, params, "data_version", true); err != nil {
			return err
		}
		return validateMetadataParam(m.Method, params["metadata"])
	case MethodReportAssetCheck:
		return validateCheck(params)
	case MethodReportCustomMessage:
		return exactKeys(m.Method, params, []string{"payload"}, nil)
	case MethodLogExternalStream:
		return validateStream(params)
	default:
		return invalid("unknown method %q", m.Method)
	}
}

func validateLog(params map[string]any) error {
	if err := exactKeys(MethodLog, params, []string{"message"}, []string{"level"}); err != nil {
		return err
	}
	if err := wantString(MethodLog, params, "message", false); err != nil {
		return err
	}
	switch l := params["level"].(type) {
	case nil:
		if _, has := params["level"]; has {
			return invalid("log: level must not be null")
		}
	case json.Number: // Dagster's log manager takes numeric levels as they are
		if _, err := l.Int64(); err != nil {
			return invalid("log: numeric level must be an integer, got %s", l)
		}
	case string:
		if _, err := ParseLevel(l); err != nil {
			return err
		}
	default:
		return invalid("log: level must be a string, got %T", l)
	}
	return nil
}

func validateCheck(params map[string]any) error {
	method := MethodReportAssetCheck
	if err := exactKeys(method, params, []string{"asset_key", "check_name", "passed", "severity", "metadata"}, nil); err != nil {
		return err
	}
	for _, k := range []string{"asset_key", "check_name"} {
		if err := wantString(method, params, k, false); err != nil {
			return err
		}
	}
	if _, ok := params["passed"].(bool); !ok {
		return invalid("%s: passed must be a boolean", method)
	}
	if s, _ := params["severity"].(string); s != string(SeverityWarn) && s != string(SeverityError) {
		return invalid("%s: severity must be WARN or ERROR, got %v", method, params["severity"])
	}
	return validateMetadataParam(method, params["metadata"])
}

func validateStream(params map[string]any) error {
	method := MethodLogExternalStream
	if err := exactKeys(method, params, []string{"stream", "text"}, []string{"extras"}); err != nil {
		return err
	}
	if s, _ := params["stream"].(string); s != "stdout" && s != "stderr" {
		return invalid("%s: stream must be stdout or stderr, got %v", method, params["stream"])
	}
	if err := wantString(method, params, "text", false); err != nil {
		return err
	}
	if e, has := params["extras"]; has && e != nil {
		if _, ok := e.(map[string]any); !ok {
			return invalid("%s: extras must be an object", method)
		}
	}
	return nil
}

// Level is a log level Dagster understands.
type Level string

// The five log levels.
const (
	LevelDebug    Level = "DEBUG"
	LevelInfo     Level = "INFO"
	LevelWarning  Level = "WARNING"
	LevelError    Level = "ERROR"
	LevelCritical Level = "CRITICAL"
)

// ParseLevel accepts a level name in any case, and the aliases WARN and
// FATAL, as Dagster's log manager does.
func ParseLevel(s string) (Level, error) {
	switch l := Level(strings.ToUpper(s)); l {
	case LevelDebug, LevelInfo, LevelWarning, LevelError, LevelCritical:
		return l, nil
	case "WARN":
		return LevelWarning, nil
	case "FATAL":
		return LevelCritical, nil
	}
	return "", invalid("log: level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got %q", s)
}

// Severity is an asset check's severity.
type Severity string

// The two severities Dagster knows.
const (
	SeverityWarn  Severity = "WARN"
	SeverityError Severity = "ERROR"
)

// Materialization is the content of report_asset_materialization.
type Materialization struct {
	// AssetKey is the escaped user string of the asset; "" means the step's
	// single asset.
	AssetKey string
	// DataVersion is the data version; "" sends null.
	DataVersion string
	// Metadata is attached to the materialization; empty sends null.
	Metadata Metadata
}

// AssetCheck is the content of report_asset_check.
type AssetCheck struct {
	// AssetKey is the checked asset; "" means the step's single asset.
	AssetKey string
	// CheckName names the check, as declared on the asset in Dagster.
	CheckName string
	// Passed is the check's outcome.
	Passed bool
	// Severity defaults to SeverityError.
	Severity Severity
	// Metadata is attached to the check's result; empty sends null.
	Metadata Metadata
}

type materializationParams struct {
	AssetKey    string   `json:"asset_key"`
	DataVersion *string  `json:"data_version"`
	Metadata    Metadata `json:"metadata"`
}

type checkParams struct {
	AssetKey  string   `json:"asset_key"`
	CheckName string   `json:"check_name"`
	Passed    bool     `json:"passed"`
	Severity  Severity `json:"severity"`
	Metadata  Metadata `json:"metadata"`
}

// Materialization decodes a report_asset_materialization message, metadata
// values kept byte for byte, so a caller can add entries and send it again
// with MaterializationMessage.
func (m *Message) Materialization() (Materialization, error) {
	if m.Method != MethodReportMaterialize {
		return Materialization{}, fmt.Errorf("message is %s, not %s", m.Method, MethodReportMaterialize)
	}
	var p materializationParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return Materialization{}, fmt.Errorf("decode materialization: %w", err)
	}
	out := Materialization{AssetKey: p.AssetKey, Metadata: p.Metadata}
	if p.DataVersion != nil {
		out.DataVersion = *p.DataVersion
	}
	return out, nil
}

// AssetCheck decodes a report_asset_check message.
func (m *Message) AssetCheck() (AssetCheck, error) {
	if m.Method != MethodReportAssetCheck {
		return AssetCheck{}, fmt.Errorf("message is %s, not %s", m.Method, MethodReportAssetCheck)
	}
	var p checkParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return AssetCheck{}, fmt.Errorf("decode asset check: %w", err)
	}
	return AssetCheck(p), nil
}

// MaterializationMessage builds a report_asset_materialization message. The
// asset key must be set.
func MaterializationMessage(mat Materialization) (*Message, error) {
	p := materializationParams{AssetKey: mat.AssetKey, Metadata: mat.Metadata}
	if mat.DataVersion != "" {
		p.DataVersion = &mat.DataVersion
	}
	if len(p.Metadata) == 0 {
		p.Metadata = nil
	}
	return NewMessage(MethodReportMaterialize, p)
}

// LogMessage builds a log message at level.
func LogMessage(level Level, message string) (*Message, error) {
	l, err := ParseLevel(string(level))
	if err != nil {
		return nil, err
	}
	return NewMessage(MethodLog, map[string]any{"message": message, "level": l})
}

// AssetCheckMessage builds a report_asset_check message. The asset key must
// be set.
func AssetCheckMessage(c AssetCheck) (*Message, error) {
	if c.Severity == "" {
		c.Severity = SeverityError
	}
	if len(c.Metadata) == 0 {
		c.Metadata = nil
	}
	return NewMessage(MethodReportAssetCheck, checkParams(c))
}
