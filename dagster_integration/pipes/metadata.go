package pipes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// MetadataType is the "type" of a metadata value, one of the names Dagster's
// metadata_value_from_external understands.
type MetadataType string

// The metadata types Dagster accepts from an external process.
const (
	TypeInfer         MetadataType = "__infer__"
	TypeText          MetadataType = "text"
	TypeURL           MetadataType = "url"
	TypePath          MetadataType = "path"
	TypeNotebook      MetadataType = "notebook"
	TypeJSON          MetadataType = "json"
	TypeMarkdown      MetadataType = "md"
	TypeFloat         MetadataType = "float"
	TypeInt           MetadataType = "int"
	TypeBool          MetadataType = "bool"
	TypeDagsterRun    MetadataType = "dagster_run"
	TypeAsset         MetadataType = "asset"
	TypeNull          MetadataType = "null"
	TypeTable         MetadataType = "table"
	TypeTableSchema   MetadataType = "table_schema"
	TypeColumnLineage MetadataType = "table_column_lineage"
	TypeTimestamp     MetadataType = "timestamp"
)

// MetadataValue is one typed metadata entry: {"raw_value": ..., "type": ...}.
// Build it with the constructors (Text, Float, Table, ...); a constructor
// that cannot encode its input records the error, and the report carrying
// the value fails with it.
type MetadataValue struct {
	// Type says how Dagster reads Raw.
	Type MetadataType
	// Raw is the JSON of raw_value, kept byte for byte (a relayed float stays
	// a float).
	Raw json.RawMessage
	err error
}

// Metadata maps labels to values.
type Metadata map[string]MetadataValue

// MarshalJSON writes {"raw_value": Raw, "type": Type}.
func (v MetadataValue) MarshalJSON() ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	t, _ := json.Marshal(string(v.Type))
	out := make([]byte, 0, len(v.Raw)+len(t)+26)
	out = append(out, `{"raw_value": `...)
	out = append(out, v.Raw...)
	out = append(out, `, "type": `...)
	out = append(out, t...)
	return append(out, '}'), nil
}

// UnmarshalJSON reads {"raw_value": ..., "type": ...} with exactly those keys.
func (v *MetadataValue) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("metadata value: %w", err)
	}
	raw, okR := m["raw_value"]
	t, okT := m["type"]
	if len(m) != 2 || !okR || !okT {
		return fmt.Errorf("metadata value needs exactly the keys raw_value and type, got %d keys", len(m))
	}
	var typ string
	if err := json.Unmarshal(t, &typ); err != nil {
		return fmt.Errorf("metadata type: %w", err)
	}
	*v = MetadataValue{Type: MetadataType(typ), Raw: append(json.RawMessage(nil), raw...)}
	return v.Validate()
}

func raw(t MetadataType, v any) MetadataValue {
	b, err := json.Marshal(v)
	if err != nil {
		return MetadataValue{Type: t, err: fmt.Errorf("%s metadata: %w", t, err)}
	}
	return MetadataValue{Type: t, Raw: b}
}

// Text is a plain string.
func Text(s string) MetadataValue { return raw(TypeText, s) }

// URL is a link shown as such in the UI.
func URL(s string) MetadataValue { return raw(TypeURL, s) }

// Path is a filesystem path.
func Path(s string) MetadataValue { return raw(TypePath, s) }

// Notebook is the path of a notebook.
func Notebook(s string) MetadataValue { return raw(TypeNotebook, s) }

// Markdown is Markdown text.
func Markdown(s string) MetadataValue { return raw(TypeMarkdown, s) }

// DagsterRun is a Dagster run id, linked in the UI.
func DagsterRun(runID string) MetadataValue { return raw(TypeDagsterRun, runID) }

// Asset is an asset key as a user string ("a/b" for ["a", "b"]).
func Asset(key string) MetadataValue { return raw(TypeAsset, key) }

// Int is an integer.
func Int(i int64) MetadataValue {
	return MetadataValue{Type: TypeInt, Raw: strconv.AppendInt(nil, i, 10)}
}

// Bool is a boolean.
func Bool(b bool) MetadataValue { return raw(TypeBool, b) }

// Null is an explicit null value.
func Null() MetadataValue { return MetadataValue{Type: TypeNull, Raw: json.RawMessage("null")} }

// Float is a float, always written with a decimal point or exponent (2.0,
// never 2). NaN and infinities have no JSON form and are refused.
func Float(f float64) MetadataValue {
	b, err := appendFloat(nil, f)
	if err != nil {
		return MetadataValue{Type: TypeFloat, err: fmt.Errorf("float metadata: %w", err)}
	}
	return MetadataValue{Type: TypeFloat, Raw: b}
}

// Timestamp is a point in time, sent as float seconds since the epoch.
func Timestamp(t time.Time) MetadataValue {
	v := Float(float64(t.UnixNano()) / 1e9)
	v.Type = TypeTimestamp
	return v
}

// JSON is any JSON object or array.
func JSON(v any) MetadataValue {
	m := raw(TypeJSON, v)
	if m.err == nil && len(m.Raw) > 0 && m.Raw[0] != '{' && m.Raw[0] != '[' {
		m.err = fmt.Errorf("json metadata must be an object or an array, got %s", m.Raw)
	}
	return m
}

// Infer lets Dagster infer the type from a plain JSON value, as the Python
// library does for raw values. A float64 or float32 is written as a float.
func Infer(v any) MetadataValue {
	switch f := v.(type) {
	case float64:
		b, err := appendFloat(nil, f)
		return MetadataValue{Type: TypeInfer, Raw: b, err: err}
	case float32:
		b, err := appendFloat(nil, float64(f))
		return MetadataValue{Type: TypeInfer, Raw: b, err: err}
	}
	return raw(TypeInfer, v)
}

// appendFloat writes f as Python's json module would: shortest round-trip
// digits, always marking it a float.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%v cannot be written as JSON", f)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
	if !bytes.ContainsAny(dst[start:], ".e") {
		dst = append(dst, '.', '0')
	}
	return dst, nil
}

// Validate checks that the raw value has the shape Dagster needs for Type.
func (v MetadataValue) Validate() error {
	if v.err != nil {
		return v.err
	}
	if !json.Valid(v.Raw) {
		return fmt.Errorf("%s metadata: raw_value is not valid JSON", v.Type)
	}
	return validateRaw(v.Type, v.Raw)
}
