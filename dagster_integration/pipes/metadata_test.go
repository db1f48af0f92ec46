package pipes

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMetadataJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value MetadataValue
		want  string
	}{
		{"float whole", Float(2), `{"raw_value":2.0,"type":"float"}`},
		{"float negative zero", Float(math.Copysign(0, -1)), `{"raw_value":-0.0,"type":"float"}`},
		{"float frac", Float(0.1), `{"raw_value":0.1,"type":"float"}`},
		{"float big", Float(1e21), `{"raw_value":1e+21,"type":"float"}`},
		{"float tiny", Float(1e-7), `{"raw_value":1e-07,"type":"float"}`},
		{"int", Int(-3), `{"raw_value":-3,"type":"int"}`},
		{"bool", Bool(false), `{"raw_value":false,"type":"bool"}`},
		{"text", Text(`a"<b>`), `{"raw_value":"a\"\u003cb\u003e","type":"text"}`},
		{"url", URL("https://x"), `{"raw_value":"https://x","type":"url"}`},
		{"path", Path("/p"), `{"raw_value":"/p","type":"path"}`},
		{"notebook", Notebook("n.ipynb"), `{"raw_value":"n.ipynb","type":"notebook"}`},
		{"md", Markdown("# t"), `{"raw_value":"# t","type":"md"}`},
		{"run", DagsterRun("r"), `{"raw_value":"r","type":"dagster_run"}`},
		{"asset", Asset("a/b"), `{"raw_value":"a/b","type":"asset"}`},
		{"null", Null(), `{"raw_value":null,"type":"null"}`},
		{"json", JSON(map[string]any{"a": 1}), `{"raw_value":{"a":1},"type":"json"}`},
		{"infer float", Infer(3.0), `{"raw_value":3.0,"type":"__infer__"}`},
		{"infer", Infer(1), `{"raw_value":1,"type":"__infer__"}`},
		{"timestamp", Timestamp(time.Unix(10, 0)), `{"raw_value":10.0,"type":"timestamp"}`},
		{
			"table",
			Table([]map[string]any{{"x": 1.0, "y": nil}}, []TableColumn{{Name: "x", Type: "float"}}),
			`{"raw_value":{"records":[{"x":1.0,"y":null}],"schema":[{"name":"x","type":"float"}]},"type":"table"}`,
		},
		{"schema", TableSchema(nil), `{"raw_value":{"columns":[]},"type":"table_schema"}`},
		{
			"lineage",
			ColumnLineage(map[string][]TableColumnDep{"c": {{AssetKey: []string{"a", "b"}, ColumnName: "d"}}}),
			`{"raw_value":{"deps_by_column":{"c":[{"asset_key":["a","b"],"column_name":"d"}]}},"type":"table_column_lineage"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tt.value)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var back MetadataValue
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("decode own output: %v", err)
			}
			if diff := cmp.Diff(tt.value.Raw, back.Raw); diff != "" {
				t.Errorf("raw after round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetadataRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value MetadataValue
	}{
		{"nan", Float(math.NaN())},
		{"inf", Float(math.Inf(1))},
		{"json scalar", JSON(3)},
		{"json unencodable", JSON(map[string]any{"c": make(chan int)})},
		{"table bad cell", Table([]map[string]any{{"x": []int{1}}}, nil)},
		{"float written as int", MetadataValue{Type: TypeFloat, Raw: json.RawMessage("2")}},
		{"int written as float", MetadataValue{Type: TypeInt, Raw: json.RawMessage("2.0")}},
		{"text not string", MetadataValue{Type: TypeText, Raw: json.RawMessage("2")}},
		{"unknown type", MetadataValue{Type: "blob", Raw: json.RawMessage("2")}},
		{"invalid json", MetadataValue{Type: TypeText, Raw: json.RawMessage(`"x`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.value.Validate(); err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			_, err := MaterializationMessage(Materialization{AssetKey: "a", Metadata: Metadata{"k": tt.value}})
			if err == nil {
				t.Fatal("MaterializationMessage accepted the value")
			}
			if tt.value.err == nil && !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("error %v does not wrap ErrInvalidMessage", err)
			}
		})
	}
}
