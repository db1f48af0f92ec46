package pipes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePythonMessages(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/python_messages.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var methods []Method
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m, ok, err := ParseMessage(sc.Bytes())
		if !ok || err != nil {
			t.Fatalf("ParseMessage(%s) = ok %v, err %v", sc.Bytes(), ok, err)
		}
		if diff := cmp.Diff(sc.Text(), string(m.Line())); diff != "" {
			t.Errorf("line changed (-want +got):\n%s", diff)
		}
		methods = append(methods, m.Method)
		if m.Method == MethodReportMaterialize {
			mat, err := m.Materialization()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("2.0", string(mat.Metadata["f"].Raw)); diff != "" {
				t.Errorf("float raw (-want +got):\n%s", diff)
			}
			mat.Metadata["added"] = Text("by raystep")
			again, err := MaterializationMessage(mat)
			if err != nil {
				t.Fatal(err)
			}
			back, _ := again.Materialization()
			if diff := cmp.Diff(mat, back, cmp.Comparer(func(a, b MetadataValue) bool {
				var ca, cb bytes.Buffer
				_ = json.Compact(&ca, a.Raw)
				_ = json.Compact(&cb, b.Raw)
				return a.Type == b.Type && ca.String() == cb.String()
			})); diff != "" {
				t.Errorf("amended round trip (-want +got):\n%s", diff)
			}
		}
	}
	want := []Method{MethodOpened, MethodLog, MethodReportMaterialize, MethodReportAssetCheck,
		MethodReportCustomMessage, MethodLogExternalStream, MethodClosed, MethodClosed}
	if diff := cmp.Diff(want, methods); diff != "" {
		t.Errorf("methods (-want +got):\n%s", diff)
	}
}

func TestLogMessage(t *testing.T) {
	t.Parallel()
	m, err := LogMessage("warn", "disk almost full")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"__dagster_pipes_version": "0.1", "method": "log", "params": {"level":"WARNING","message":"disk almost full"}}`
	if diff := cmp.Diff(want, string(m.Line())); diff != "" {
		t.Errorf("line (-want +got):\n%s", diff)
	}
	if _, err := LogMessage("LOUD", "x"); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("LogMessage(LOUD) error %v, want ErrInvalidMessage", err)
	}
}

func TestParseMessage(t *testing.T) {
	t.Parallel()
	const v = `"__dagster_pipes_version": "0.1", `
	tests := []struct {
		name    string
		line    string
		wantOK  bool
		wantErr bool
	}{
		{name: "plain", line: "hello"},
		{name: "json array", line: `[1]`},
		{name: "json object without version", line: `{"method": "log"}`},
		{name: "truncated", line: `{` + v + `"method": "log"`},
		{name: "log", line: `{` + v + `"method": "log", "params": {"message": "m", "level": "info"}}`, wantOK: true},
		{name: "log alias level", line: `{` + v + `"method": "log", "params": {"message": "m", "level": "warn"}}`, wantOK: true},
		{name: "log numeric level", line: `{` + v + `"method": "log", "params": {"message": "m", "level": 25}}`, wantOK: true},
		{name: "log null level", line: `{` + v + `"method": "log", "params": {"message": "m", "level": null}}`, wantOK: true, wantErr: true},
		{name: "log default level", line: `{` + v + `"method": "log", "params": {"message": "m"}}`, wantOK: true},
		{name: "log bad level", line: `{` + v + `"method": "log", "params": {"message": "m", "level": "TRACE"}}`, wantOK: true, wantErr: true},
		{name: "log extra key", line: `{` + v + `"method": "log", "params": {"message": "m", "level": "INFO", "x": 1}}`, wantOK: true, wantErr: true},
		{name: "no params", line: `{` + v + `"method": "log"}`, wantOK: true, wantErr: true},
		{name: "unknown method", line: `{` + v + `"method": "shout", "params": {}}`, wantOK: true, wantErr: true},
		{name: "closed null", line: `{` + v + `"method": "closed", "params": null}`, wantOK: true},
		{name: "closed short exception", line: `{` + v + `"method": "closed", "params": {"exception": {"message": "m"}}}`, wantOK: true, wantErr: true},
		{name: "materialization missing data_version", line: `{` + v + `"method": "report_asset_materialization", "params": {"asset_key": "a", "metadata": null}}`, wantOK: true, wantErr: true},
		{name: "materialization float as int", line: `{` + v + `"method": "report_asset_materialization", "params": {"asset_key": "a", "data_version": null, "metadata": {"f": {"raw_value": 2, "type": "float"}}}}`, wantOK: true, wantErr: true},
		{name: "check bad severity", line: `{` + v + `"method": "report_asset_check", "params": {"asset_key": "a", "check_name": "c", "passed": true, "severity": "FATAL", "metadata": null}}`, wantOK: true, wantErr: true},
		{name: "check passed string", line: `{` + v + `"method": "report_asset_check", "params": {"asset_key": "a", "check_name": "c", "passed": "yes", "severity": "WARN", "metadata": null}}`, wantOK: true, wantErr: true},
		{name: "stream bad", line: `{` + v + `"method": "log_external_stream", "params": {"stream": "tty", "text": "t"}}`, wantOK: true, wantErr: true},
		{name: "custom", line: `  {` + v + `"method": "report_custom_message", "params": {"payload": null}}` + "\r", wantOK: true},
		{name: "worker prefix", line: `(pid=12) {` + v + `"method": "log", "params": {"message": "m"}}`},
		{name: "method not a string", line: `{` + v + `"method": 1, "params": {}}`, wantOK: true, wantErr: true},
		{name: "params a list", line: `{` + v + `"method": "log", "params": []}`, wantOK: true, wantErr: true},
		{name: "version not string", line: `{"__dagster_pipes_version": 1, "method": "log", "params": {"message": "m"}}`, wantOK: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ok, err := ParseMessage([]byte(tt.line))
			if ok != tt.wantOK || (err != nil) != tt.wantErr {
				t.Fatalf("ParseMessage = ok %v err %v, want ok %v err %v", ok, err, tt.wantOK, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("error %v does not wrap ErrInvalidMessage", err)
			}
		})
	}
}
