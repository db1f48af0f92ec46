package pipes

import (
	"encoding/json"
	"fmt"
)

// TableColumn describes one column of a table or table schema.
type TableColumn struct {
	Name string `json:"name"`
	// Type is the column's type as shown in the UI, e.g. "string" or
	// "float"; Dagster does not check it.
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	// Tags are shown beside the column.
	Tags        map[string]string       `json:"tags,omitempty"`
	Constraints *TableColumnConstraints `json:"constraints,omitempty"`
}

// TableColumnConstraints are a column's constraints.
type TableColumnConstraints struct {
	Nullable bool `json:"nullable"`
	Unique   bool `json:"unique"`
	// Other holds free-text constraints, e.g. "value > 0".
	Other []string `json:"other"`
}

// TableColumnDep names a column of another asset that a column depends on.
// AssetKey holds the key's path parts: Dagster reads a plain string here as
// a single part, so "a/b" would name the asset ["a/b"], not ["a", "b"].
type TableColumnDep struct {
	AssetKey   []string `json:"asset_key"`
	ColumnName string   `json:"column_name"`
}

// Table is a small table shown in the UI. Record values are strings,
// integers, floats (kept floats), booleans or nil.
func Table(records []map[string]any, schema []TableColumn) MetadataValue {
	recs := make([]map[string]json.RawMessage, len(records))
	for i, r := range records {
		recs[i] = make(map[string]json.RawMessage, len(r))
		for k, v := range r {
			b, err := recordValue(v)
			if err != nil {
				return MetadataValue{Type: TypeTable, err: fmt.Errorf("table record %d column %q: %w", i, k, err)}
			}
			recs[i][k] = b
		}
	}
	if schema == nil {
		schema = []TableColumn{}
	}
	return raw(TypeTable, map[string]any{"records": recs, "schema": schema})
}

func recordValue(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case float64:
		return appendFloat(nil, x)
	case float32:
		return appendFloat(nil, float64(x))
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return json.Marshal(x)
	default:
		return nil, fmt.Errorf("unsupported record value type %T", v)
	}
}

// TableSchema is the schema of a table.
func TableSchema(columns []TableColumn) MetadataValue {
	if columns == nil {
		columns = []TableColumn{}
	}
	return raw(TypeTableSchema, map[string]any{"columns": columns})
}

// ColumnLineage maps each column to the upstream columns it derives from.
func ColumnLineage(depsByColumn map[string][]TableColumnDep) MetadataValue {
	if depsByColumn == nil {
		depsByColumn = map[string][]TableColumnDep{}
	}
	return raw(TypeColumnLineage, map[string]any{"deps_by_column": depsByColumn})
}
