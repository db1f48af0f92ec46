package pipes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalidMessage is wrapped by every error about a message Dagster's
// handler would reject (and whose rejection would stop its reader).
var ErrInvalidMessage = errors.New("invalid dagster pipes message")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidMessage, fmt.Sprintf(format, a...))
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// validateRaw checks a raw_value against what metadata_value_from_external
// accepts for its type.
func validateRaw(t MetadataType, raw []byte) error {
	v, err := decodeAny(raw)
	if err != nil {
		return invalid("%s metadata: %v", t, err)
	}
	switch t {
	case TypeInfer, TypeNull:
		return nil
	case TypeText, TypeURL, TypePath, TypeNotebook, TypeMarkdown, TypeDagsterRun, TypeAsset:
		if _, ok := v.(string); !ok {
			return invalid("%s metadata needs a string, got %s", t, raw)
		}
	case TypeFloat, TypeTimestamp:
		if _, ok := v.(json.Number); !ok {
			return invalid("%s metadata needs a number, got %s", t, raw)
		}
		if t == TypeFloat && !bytes.ContainsAny(raw, ".eE") {
			return invalid("float metadata %s would arrive as an int: write it as a float", raw)
		}
	case TypeInt:
		if _, ok := v.(json.Number); !ok || bytes.ContainsAny(raw, ".eE") {
			return invalid("int metadata needs an integer, got %s", raw)
		}
	case TypeBool:
		if _, ok := v.(bool); !ok {
			return invalid("bool metadata needs true or false, got %s", raw)
		}
	case TypeJSON:
		switch v.(type) {
		case map[string]any, []any:
		default:
			return invalid("json metadata needs an object or an array, got %s", raw)
		}
	case TypeTable:
		return validateTable(v)
	case TypeTableSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return invalid("table_schema metadata needs an object")
		}
		return validateColumns(m["columns"], "table_schema columns")
	case TypeColumnLineage:
		return validateLineage(v)
	default:
		return invalid("unknown metadata type %q", t)
	}
	return nil
}

func validateTable(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return invalid("table metadata needs an object with records and schema")
	}
	recs, ok := m["records"].([]any)
	if !ok {
		return invalid("table metadata needs a records array")
	}
	for i, r := range recs {
		row, ok := r.(map[string]any)
		if !ok {
			return invalid("table record %d must be an object", i)
		}
		for k, cell := range row {
			switch cell.(type) {
			case nil, string, bool, json.Number:
			default:
				return invalid("table record %d column %q: values must be scalars", i, k)
			}
		}
	}
	return validateColumns(m["schema"], "table schema")
}

func validateColumns(v any, what string) error {
	cols, ok := v.([]any)
	if !ok {
		return invalid("%s must be an array", what)
	}
	for i, c := range cols {
		col, ok := c.(map[string]any)
		if !ok {
			return invalid("%s %d must be an object", what, i)
		}
		for _, k := range []string{"name", "type"} {
			if _, ok := col[k].(string); !ok {
				return invalid("%s %d needs a string %q", what, i, k)
			}
		}
		for k := range col {
			switch k {
			case "name", "type", "description", "tags", "constraints":
			default:
				return invalid("%s %d has unknown key %q", what, i, k)
			}
		}
	}
	return nil
}

func validateLineage(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return invalid("table_column_lineage metadata needs an object")
	}
	deps, ok := m["deps_by_column"].(map[string]any)
	if !ok {
		return invalid("table_column_lineage metadata needs a deps_by_column object")
	}
	for col, d := range deps {
		list, ok := d.([]any)
		if !ok {
			return invalid("lineage of column %q must be an array", col)
		}
		for _, e := range list {
			dep, ok := e.(map[string]any)
			if !ok || len(dep) != 2 {
				return invalid("lineage of column %q: each dep needs exactly asset_key and column_name", col)
			}
			_, okC := dep["column_name"].(string)
			if !okC || !assetKeyValue(dep["asset_key"]) {
				return invalid("lineage of column %q: asset_key must be a string or a list of strings, column_name a string", col)
			}
		}
	}
	return nil
}

// exactKeys checks that params has every required key, no key outside
// required+optional.
func exactKeys(method Method, params map[string]any, required, optional []string) error {
	for _, k := range required {
		if _, ok := params[k]; !ok {
			return invalid("%s: missing param %q", method, k)
		}
	}
	for k := range params {
		if !contains(required, k) && !contains(optional, k) {
			return invalid("%s: unexpected param %q", method, k)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func wantString(method Method, params map[string]any, key string, nullable bool) error {
	v := params[key]
	if v == nil && nullable {
		return nil
	}
	if _, ok := v.(string); !ok {
		return invalid("%s: %q must be a string, got %T", method, key, v)
	}
	return nil
}

func validateMetadataParam(method Method, v any) error {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return invalid("%s: metadata must be an object or null", method)
	}
	for k, entry := range m {
		e, ok := entry.(map[string]any)
		if !ok || len(e) != 2 {
			return invalid("%s: metadata %q needs exactly raw_value and type", method, k)
		}
		t, ok := e["type"].(string)
		_, hasRaw := e["raw_value"]
		if !ok || !hasRaw {
			return invalid("%s: metadata %q needs exactly raw_value and type", method, k)
		}
		rawValue, err := json.Marshal(e["raw_value"])
		if err != nil {
			return invalid("%s: metadata %q: %v", method, k, err)
		}
		if err := validateRaw(MetadataType(t), rawValue); err != nil {
			return fmt.Errorf("%s: metadata %q: %w", method, k, err)
		}
	}
	return nil
}

func validateException(v any, depth int) error {
	if depth > 32 {
		return invalid("closed: exception chain deeper than 32")
	}
	e, ok := v.(map[string]any)
	if !ok {
		return invalid("closed: exception must be an object")
	}
	if err := exactKeys(MethodClosed, e, []string{"message", "stack", "name", "cause", "context"}, nil); err != nil {
		return err
	}
	if err := wantString(MethodClosed, e, "message", false); err != nil {
		return err
	}
	if err := wantString(MethodClosed, e, "name", true); err != nil {
		return err
	}
	stack, ok := e["stack"].([]any)
	if !ok {
		return invalid("closed: exception stack must be an array of strings")
	}
	for _, s := range stack {
		if _, ok := s.(string); !ok {
			return invalid("closed: exception stack must be an array of strings")
		}
	}
	for _, k := range []string{"cause", "context"} {
		if e[k] != nil {
			if err := validateException(e[k], depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func assetKeyValue(v any) bool {
	switch k := v.(type) {
	case string:
		return true
	case []any:
		for _, p := range k {
			if _, ok := p.(string); !ok {
				return false
			}
		}
		return len(k) > 0
	}
	return false
}
