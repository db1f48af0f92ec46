package pipes

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeDecodeBootstrapRoundTrip(t *testing.T) {
	t.Parallel()
	in := Params{"path": "/tmp/x", "n": json.Number("4611686018427387904")}
	enc, err := EncodeBootstrap(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Params
	if err := DecodeBootstrap(enc, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestDecodeBootstrapFromPython(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/bootstrap_python.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var ctx, msgs Params
	if err := DecodeBootstrap(lines[0], &ctx); err != nil {
		t.Fatal(err)
	}
	if err := DecodeBootstrap(lines[1], &msgs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Params{"stdio": "stdout"}, msgs); diff != "" {
		t.Errorf("message params (-want +got):\n%s", diff)
	}
	c, err := loadContext(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	v1, dv := "v1", "2024-01-01"
	job := "j"
	want := ContextData{
		AssetKeys:             []string{"a/b", `c\/d`},
		CodeVersionByAssetKey: map[string]*string{"a/b": &v1, `c\/d`: nil},
		ProvenanceByAssetKey: map[string]*DataProvenance{
			"a/b":  {CodeVersion: "v1", InputDataVersions: map[string]string{"up": "x"}, IsUserProvided: true},
			`c\/d`: nil,
		},
		PartitionKey:        &dv,
		PartitionKeyRange:   &PartitionKeyRange{Start: dv, End: dv},
		PartitionTimeWindow: &TimeWindow{Start: "2024-01-01T00:00:00+00:00", End: "2024-01-02T00:00:00+00:00"},
		RunID:               "r1",
		JobName:             &job,
		RetryNumber:         2,
		Extras:              map[string]any{"big": json.Number("4611686018427387904"), "f": json.Number("2.0"), "s": "ü"},
	}
	if diff := cmp.Diff(want, c.Data()); diff != "" {
		t.Errorf("context (-want +got):\n%s", diff)
	}
}

func zlibB64(b []byte) string {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestDecodeBootstrapErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
	}{
		{name: "not base64", value: "!!!"},
		{name: "gzip not zlib", value: base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 0, 0})},
		{name: "raw json", value: base64.StdEncoding.EncodeToString([]byte(`{"a":1}`))},
		{name: "bad json", value: zlibB64([]byte(`{"a":`))},
		{name: "trailing", value: zlibB64([]byte(`{} {}`))},
		{name: "truncated zlib", value: zlibB64([]byte(`{"a":1}`))[:8]},
		{name: "empty", value: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p Params
			if err := DecodeBootstrap(tt.value, &p); !errors.Is(err, ErrBootstrap) {
				t.Errorf("DecodeBootstrap(%q) = %v, want ErrBootstrap", tt.value, err)
			}
		})
	}
}

func TestBootstrapValues(t *testing.T) {
	t.Parallel()
	env := map[string]string{EnvContext: "envC", EnvMessages: "envM"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name            string
		args            []string
		lookup          func(string) (string, bool)
		wantC, wantM    string
		wantOK, wantErr bool
	}{
		{name: "nothing", wantOK: false},
		{name: "env", lookup: lookup, wantC: "envC", wantM: "envM", wantOK: true},
		{name: "args win", args: []string{ArgContext, "argC", ArgMessages + "=argM"}, lookup: lookup, wantC: "argC", wantM: "argM", wantOK: true},
		{name: "context without messages", args: []string{ArgContext, "c"}, wantErr: true},
		{name: "flag without value", args: []string{ArgContext}, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, m, ok, err := bootstrapValues(tt.args, tt.lookup)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			got := []any{c, m, ok}
			if diff := cmp.Diff([]any{tt.wantC, tt.wantM, tt.wantOK}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzDecodeBootstrap(f *testing.F) {
	f.Add("")
	f.Add(zlibB64([]byte(`{"path": "/x"}`)))
	f.Add(zlibB64([]byte(`{"data": {"asset_keys": null}}`)))
	f.Add(zlibB64([]byte(`{"data": 3}`)))
	f.Fuzz(func(t *testing.T, s string) {
		var p Params
		if err := DecodeBootstrap(s, &p); err != nil {
			if !errors.Is(err, ErrBootstrap) {
				t.Fatalf("error does not wrap ErrBootstrap: %v", err)
			}
			return
		}
		// Whatever decodes must also load or fail cleanly.
		_, _ = loadContext(p, func(string) ([]byte, error) { return []byte(`{}`), nil })
		if _, hasPath := p["path"]; !hasPath { // a path would create a file
			_, _ = openChannel(p, NewStream(&bytes.Buffer{}), NewStream(&bytes.Buffer{}))
		}
	})
}

// TestZlibStoredIsZlib: the stored stream EncodeBootstrap writes for small
// values decodes with the standard zlib reader, for an empty value, a
// short one and ones that span several stored blocks.
func TestZlibStoredIsZlib(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 300, 0xffff, 0xffff + 1, 3*0xffff + 17} {
		raw := bytes.Repeat([]byte("raystep!"), n/8+1)[:n]
		zr, err := zlib.NewReader(bytes.NewReader(zlibStored(raw)))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(got, raw) {
			t.Errorf("%d bytes: got %d bytes back, not the same", n, len(got))
		}
	}
}

// TestEncodeBootstrapCompressesLargeValues: above storedMax the value is
// compressed, so a large but repetitive context still fits an environment
// variable.
func TestEncodeBootstrapCompressesLargeValues(t *testing.T) {
	t.Parallel()
	keys := make([]string, 4000)
	for i := range keys {
		keys[i] = "2026-01-01"
	}
	in := Params{"partition_keys": keys}
	enc, err := EncodeBootstrap(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(in)
	if len(enc) >= len(raw)/4 {
		t.Errorf("encoded %d bytes of JSON into %d: not compressed", len(raw), len(enc))
	}
	var out Params
	if err := DecodeBootstrap(enc, &out); err != nil {
		t.Fatal(err)
	}
	if len(out["partition_keys"].([]any)) != len(keys) {
		t.Errorf("round trip lost keys")
	}
}
