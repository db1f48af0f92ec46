package pipes

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func bootstrapEnv(t *testing.T, data ContextData, msgs Params) func(string) (string, bool) {
	t.Helper()
	env, err := BootstrapEnv(ContextDataParams(data), msgs)
	if err != nil {
		t.Fatal(err)
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestInactiveSessionDoesNothing(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s, err := Open(Options{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if s.Active() {
		t.Fatal("session without bootstrap is active")
	}
	errs := []error{
		s.Log(LevelInfo, "x"),
		s.ReportAssetMaterialization(Materialization{Metadata: Metadata{"f": Float(1)}}),
		s.ReportAssetCheck(AssetCheck{CheckName: "c"}),
		s.ReportCustomMessage(1),
		s.Close(nil),
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("inactive session wrote %q", out.String())
	}
}

func TestSessionStdoutLines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s, err := Open(Options{
		LookupEnv: bootstrapEnv(t, ContextData{AssetKeys: []string{"a/b"}, RunID: "r"}, StdioMessagesParams("stdout")),
		Stdout:    &out, Stderr: &bytes.Buffer{},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Stdout().Write([]byte("partial plain"))
	steps := []error{
		s.Log("warning", "careful"),
		s.ReportAssetMaterialization(Materialization{DataVersion: "v1", Metadata: Metadata{"f": Float(2)}}),
		s.ReportAssetCheck(AssetCheck{CheckName: "c", Passed: true}),
		s.ReportCustomMessage([]int{1}),
		s.LogExternalStream("stderr", "t", nil),
		s.Close(nil),
		s.Close(nil),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatal(err)
	}
	const v = `{"__dagster_pipes_version": "0.1", "method": `
	want := "partial plain\n" +
		v + `"opened", "params": {"extras":{}}}` + "\n" +
		v + `"log", "params": {"level":"WARNING","message":"careful"}}` + "\n" +
		v + `"report_asset_materialization", "params": {"asset_key":"a/b","data_version":"v1","metadata":{"f":{"raw_value":2.0,"type":"float"}}}}` + "\n" +
		v + `"report_asset_check", "params": {"asset_key":"a/b","check_name":"c","passed":true,"severity":"ERROR","metadata":null}}` + "\n" +
		v + `"report_custom_message", "params": {"payload":[1]}}` + "\n" +
		v + `"log_external_stream", "params": {"extras":{},"stream":"stderr","text":"t"}}` + "\n" +
		v + `"closed", "params": {}}` + "\n"
	// "opened" was written before the partial plain line.
	want = strings.Replace(want, "partial plain\n"+v+`"opened", "params": {"extras":{}}}`+"\n", v+`"opened", "params": {"extras":{}}}`+"\n"+"partial plain\n", 1)
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if err := s.Log(LevelInfo, "late"); !errors.Is(err, ErrClosed) {
		t.Errorf("Log after Close = %v, want ErrClosed", err)
	}
}

func TestSessionRefusals(t *testing.T) {
	t.Parallel()
	s, err := Open(Options{
		LookupEnv: bootstrapEnv(t, ContextData{AssetKeys: []string{"a", "b"}}, StdioMessagesParams("stderr")),
		Stdout:    &bytes.Buffer{}, Stderr: &bytes.Buffer{},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{"ambiguous asset", s.ReportAssetMaterialization(Materialization{})},
		{"foreign asset", s.ReportAssetMaterialization(Materialization{AssetKey: "c"})},
		{"twice", errors.Join(s.ReportAssetMaterialization(Materialization{AssetKey: "a"}), s.ReportAssetMaterialization(Materialization{AssetKey: "a"}))},
		{"bad severity", s.ReportAssetCheck(AssetCheck{AssetKey: "a", CheckName: "c", Severity: "HIGH"})},
		{"bad level", s.Log("TRACE", "x")},
		{"bad stream", s.LogExternalStream("tty", "x", nil)},
		{"forward opened", s.Forward(&Message{Method: MethodOpened, Params: json.RawMessage(`{}`)})},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrInvalidMessage) {
			t.Errorf("%s: err = %v, want ErrInvalidMessage", tt.name, tt.err)
		}
	}
}

func TestSessionFileChannelAndPathContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctxPath, msgPath := filepath.Join(dir, "context"), filepath.Join(dir, "messages")
	if err := os.WriteFile(ctxPath, []byte(`{"asset_keys": ["x"], "run_id": "r", "retry_number": 0, "extras": {"k": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctxVal, _ := EncodeBootstrap(ContextPathParams(ctxPath))
	msgVal, _ := EncodeBootstrap(FileMessagesParams(msgPath))
	s, err := Open(Options{Args: []string{"--other", ArgContext, ctxVal, ArgMessages, msgVal}})
	if err != nil {
		t.Fatal(err)
	}
	if k, err := s.Context().AssetKey(); err != nil || k != "x" {
		t.Fatalf("AssetKey() = %q, %v", k, err)
	}
	if _, err := s.Context().PartitionKey(); !errors.Is(err, ErrUndefined) {
		t.Errorf("PartitionKey() err = %v, want ErrUndefined", err)
	}
	if err := s.CloseWithError(errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(msgPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), raw)
	}
	m, ok, err := ParseMessage([]byte(lines[1]))
	if !ok || err != nil || m.Method != MethodClosed {
		t.Fatalf("closed line %q: ok %v err %v", lines[1], ok, err)
	}
}

func TestOpenBadBootstrap(t *testing.T) {
	t.Parallel()
	bad, _ := EncodeBootstrap(Params{"nothing": 1})
	good, _ := EncodeBootstrap(StdioMessagesParams("stdout"))
	ctx, _ := EncodeBootstrap(ContextDataParams(ContextData{}))
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"garbage context", map[string]string{EnvContext: "%%", EnvMessages: good}},
		{"no loader", map[string]string{EnvContext: bad, EnvMessages: good}},
		{"no writer", map[string]string{EnvContext: ctx, EnvMessages: bad}},
		{"missing messages", map[string]string{EnvContext: ctx}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Open(Options{LookupEnv: func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }})
			if !errors.Is(err, ErrBootstrap) {
				t.Errorf("Open() err = %v, want ErrBootstrap", err)
			}
		})
	}
}

func TestRecoverSendsClosed(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s, err := Open(Options{LookupEnv: bootstrapEnv(t, ContextData{}, Params{"buffered_stdio": "stdout"}), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		defer s.Recover()
		panic("kaboom")
	}()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	m, _, err := ParseMessage([]byte(lines[len(lines)-1]))
	if err != nil || m.Method != MethodClosed || !strings.Contains(string(m.Params), "kaboom") {
		t.Fatalf("last line %q, err %v", lines[len(lines)-1], err)
	}
}

// TestSessionConcurrentFileWrites checks that concurrent reports never
// interleave inside a line of the message file.
func TestSessionConcurrentFileWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "messages")
	ctxVal, _ := EncodeBootstrap(ContextDataParams(ContextData{}))
	msgVal, _ := EncodeBootstrap(FileMessagesParams(path))
	s, err := Open(Options{Args: []string{ArgContext, ctxVal, ArgMessages, msgVal}})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 200
	done := make(chan error, workers)
	for w := range workers {
		go func() {
			var err error
			for i := range each {
				err = errors.Join(err, s.ReportCustomMessage(strings.Repeat(string(rune('a'+w)), 100+i)))
			}
			done <- err
		}()
	}
	for range workers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(nil); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != workers*each+2 {
		t.Fatalf("got %d lines, want %d", len(lines), workers*each+2)
	}
	for _, l := range lines {
		if _, ok, err := ParseMessage([]byte(l)); !ok || err != nil {
			t.Fatalf("corrupt line %q: %v", l, err)
		}
	}
}
