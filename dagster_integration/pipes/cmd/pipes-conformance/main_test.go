package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/raystep/raystep/dagster_integration/pipes"
)

func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	extras := write("extras.json", `{"a": [1, 2.5]}`)
	payload := write("payload.json", `{"payload": {"x": 1}}`)
	check := write("check.json", `{"passed": false, "severity": "WARN", "checkName": "c"}`)
	tests := []struct {
		name        string
		args        []string
		wantCode    int
		wantMethods []string
	}{
		{"log", []string{"--test-name", "test_message_log"}, 0, []string{"opened", "log", "log", "log", "log", "log", "closed"}},
		{"error", []string{"--test-name", "test_error_reporting"}, 1, []string{"opened", "closed"}},
		{"components", []string{"--test-name", "test_components[x-y]", "--extras", extras, "--job-name", "job"}, 0, []string{"opened", "report_custom_message", "closed"}},
		{"wrong job", []string{"--test-name", "test_extras", "--job-name", "other"}, 1, []string{"opened", "closed"}},
		{"payload", []string{"--test-name", "test_message_report_custom_message[1]", "--custom-payload", payload}, 0, []string{"opened", "report_custom_message", "closed"}},
		{"check", []string{"--test-name", "test_message_report_asset_check[1]", "--report-asset-check", check}, 0, []string{"opened", "report_asset_check", "closed"}},
		{"bad flag", []string{"--nope"}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := "job"
			env, err := pipes.BootstrapEnv(pipes.ContextDataParams(pipes.ContextData{
				AssetKeys: []string{"my_asset"}, JobName: &job,
				Extras: map[string]any{"a": []any{1, 2.5}},
			}), pipes.StdioMessagesParams("stdout"))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			code := run(tt.args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &out, &bytes.Buffer{})
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			var methods []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var m struct{ Method string }
				if l != "" && json.Unmarshal([]byte(l), &m) == nil {
					methods = append(methods, m.Method)
				}
			}
			if diff := cmp.Diff(tt.wantMethods, methods); diff != "" {
				t.Errorf("methods (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSampleMetadataIsTheSuites checks that materializations and asset
// checks carry exactly the metadata the community conformance suite
// expects (testdata/metadata.json): every entry, nothing else, the float
// still written as a float.
func TestSampleMetadataIsTheSuites(t *testing.T) {
	t.Parallel()
	want := decodeNumbers(t, readFile(t, filepath.Join("testdata", "metadata.json")))
	dir := t.TempDir()
	mat := filepath.Join(dir, "mat.json")
	check := filepath.Join(dir, "check.json")
	for path, body := range map[string]string{mat: `{"dataVersion": "alpha"}`, check: `{"passed": true, "severity": "ERROR", "checkName": "my_check"}`} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name, method string
		args         []string
	}{
		{"materialization", "report_asset_materialization", []string{"--test-name", "test_message_report_asset_materialization[x]", "--report-asset-materialization", mat}},
		{"asset check", "report_asset_check", []string{"--test-name", "test_message_report_asset_check[x]", "--report-asset-check", check}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, err := pipes.BootstrapEnv(pipes.ContextDataParams(pipes.ContextData{AssetKeys: []string{"my_asset"}, Extras: map[string]any{}}),
				pipes.StdioMessagesParams("stdout"))
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := run(tt.args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &out, &errOut); code != 0 {
				t.Fatalf("exit code %d: %s", code, errOut.String())
			}
			var meta json.RawMessage
			for _, l := range strings.Split(out.String(), "\n") {
				var m struct {
					Method string
					Params struct{ Metadata json.RawMessage }
				}
				if json.Unmarshal([]byte(l), &m) == nil && m.Method == tt.method {
					meta = m.Params.Metadata
				}
			}
			if meta == nil {
				t.Fatalf("no %s message in:\n%s", tt.method, out.String())
			}
			if diff := cmp.Diff(want, decodeNumbers(t, meta)); diff != "" {
				t.Errorf("metadata (-suite's +sent):\n%s", diff)
			}
			var entries map[string]struct {
				RawValue json.RawMessage `json:"raw_value"`
			}
			if err := json.Unmarshal(meta, &entries); err != nil {
				t.Fatal(err)
			}
			if f := string(entries["float"].RawValue); !strings.Contains(f, ".") {
				t.Errorf("float raw_value = %s, want a number with a decimal point", f)
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeNumbers decodes JSON keeping numbers as written, so 1 and 1.0 differ.
func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}
