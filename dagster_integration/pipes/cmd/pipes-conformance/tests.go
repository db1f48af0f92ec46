package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// errVeryBad is the failure test_error_reporting expects, word for word.
var errVeryBad = errors.New("Very bad error has happened!") //nolint:staticcheck // the suite matches this text

func runTest(s *pipes.Session, o options) error {
	if o.contextLoader != "" && o.contextLoader != "default" || o.messageWriter != "" && o.messageWriter != "default" {
		return fmt.Errorf("only the default context loader and message writer are supported")
	}
	if err := checkContext(s.Context(), o); err != nil {
		return err
	}
	switch o.testName {
	case "test_error_reporting":
		return errVeryBad
	case "test_message_log":
		return logAllLevels(s)
	case "test_components":
		return s.ReportCustomMessage("Hello from external process!")
	}
	if o.customPayload != "" {
		if err := sendCustomPayload(s, o.customPayload); err != nil {
			return err
		}
	}
	if o.reportAssetMaterialization != "" {
		if err := reportMaterialization(s, o.reportAssetMaterialization); err != nil {
			return err
		}
	}
	if o.reportAssetCheck != "" {
		return reportCheck(s, o.reportAssetCheck)
	}
	return nil
}

func checkContext(c *pipes.Context, o options) error {
	if o.jobName != "" && c.JobName() != o.jobName {
		return fmt.Errorf("job name: want %q, context has %q", o.jobName, c.JobName())
	}
	if o.extras == "" {
		return nil
	}
	var want map[string]any
	if err := readJSON(o.extras, &want); err != nil {
		return err
	}
	// Compare through one JSON round trip so numbers compare alike.
	got, err := normalize(c.Extras())
	if err != nil {
		return err
	}
	if w, _ := normalize(want); !reflect.DeepEqual(got, w) {
		return fmt.Errorf("extras: want %v, context has %v", w, got)
	}
	return nil
}

func normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("normalize: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("normalize: %w", err)
	}
	return out, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

func logAllLevels(s *pipes.Session) error {
	for _, l := range []struct {
		level pipes.Level
		text  string
	}{
		{pipes.LevelDebug, "Debug message"},
		{pipes.LevelInfo, "Info message"},
		{pipes.LevelWarning, "Warning message"},
		{pipes.LevelError, "Error message"},
		{pipes.LevelCritical, "Critical message"},
	} {
		if err := s.Log(l.level, l.text); err != nil {
			return err
		}
	}
	return nil
}

func sendCustomPayload(s *pipes.Session, path string) error {
	var wrapper map[string]any
	if err := readJSON(path, &wrapper); err != nil {
		return err
	}
	payload, ok := wrapper["payload"]
	if !ok {
		return fmt.Errorf("%s: no \"payload\" key", path)
	}
	return s.ReportCustomMessage(payload)
}

func reportMaterialization(s *pipes.Session, path string) error {
	var spec struct {
		AssetKey    string `json:"assetKey"`
		DataVersion string `json:"dataVersion"`
	}
	if err := readJSON(path, &spec); err != nil {
		return err
	}
	return s.ReportAssetMaterialization(pipes.Materialization{
		AssetKey: spec.AssetKey, DataVersion: spec.DataVersion, Metadata: sampleMetadata(),
	})
}

func reportCheck(s *pipes.Session, path string) error {
	var spec struct {
		AssetKey  string         `json:"assetKey"`
		CheckName string         `json:"checkName"`
		Passed    bool           `json:"passed"`
		Severity  pipes.Severity `json:"severity"`
	}
	if err := readJSON(path, &spec); err != nil {
		return err
	}
	return s.ReportAssetCheck(pipes.AssetCheck{
		AssetKey: spec.AssetKey, CheckName: spec.CheckName, Passed: spec.Passed,
		Severity: spec.Severity, Metadata: sampleMetadata(),
	})
}

// sampleMetadata is the metadata the conformance suite expects on every
// materialization and asset check, entry for entry (its metadata.json,
// mirrored in testdata/metadata.json): the suite compares each value with
// the one it builds itself, so nothing may be added or changed.
func sampleMetadata() pipes.Metadata {
	return pipes.Metadata{
		"bool_true":  pipes.Bool(true),
		"bool_false": pipes.Bool(false),
		"float":      pipes.Float(0.1),
		"int":        pipes.Int(1),
		"url":        pipes.URL("https://dagster.io"),
		"path":       pipes.Path("/dev/null"),
		"null":       pipes.Null(),
		"md":         pipes.Markdown("**markdown**"),
		"json": pipes.JSON(map[string]any{
			"quux": map[string]any{"a": 1, "b": 2}, "corge": nil, "qux": []int{1, 2, 3}, "foo": "bar", "baz": 1,
		}),
		"text":        pipes.Text("hello"),
		"asset":       pipes.Asset("foo/bar"),
		"dagster_run": pipes.DagsterRun("db892d7f-0031-4747-973d-22e8b9095d9d"),
		"notebook":    pipes.Notebook("notebook.ipynb"),
	}
}
