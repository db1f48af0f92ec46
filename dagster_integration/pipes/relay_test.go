package pipes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testMsg = `{"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": "hi", "level": "INFO"}}`

type relayResult struct {
	Out      string
	Methods  []Method
	Warnings int
}

func runRelay(t *testing.T, max int, chunks ...string) relayResult {
	t.Helper()
	var res relayResult
	var out bytes.Buffer
	r := &Relay{
		Out:       &out,
		MaxLine:   max,
		OnMessage: func(m *Message) error { res.Methods = append(res.Methods, m.Method); return nil },
		OnWarning: func(string) { res.Warnings++ },
	}
	for _, c := range chunks {
		if n, err := r.Write([]byte(c)); err != nil || n != len(c) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	res.Out = out.String()
	return res
}

func TestRelay(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		max    int
		chunks []string
		want   relayResult
	}{
		{name: "plain", chunks: []string{"a\nb\n"}, want: relayResult{Out: "a\nb\n"}},
		{name: "message between", chunks: []string{"a\n" + testMsg + "\nb\n"}, want: relayResult{Out: "a\nb\n", Methods: []Method{MethodLog}}},
		{name: "message split", chunks: []string{"a\n" + testMsg[:10], testMsg[10:50], testMsg[50:] + "\nb"}, want: relayResult{Out: "a\nb", Methods: []Method{MethodLog}}},
		{name: "message without newline at end", chunks: []string{testMsg}, want: relayResult{Methods: []Method{MethodLog}}},
		{name: "crlf", chunks: []string{testMsg + "\r\nx\r\n"}, want: relayResult{Out: "x\r\n", Methods: []Method{MethodLog}}},
		{name: "invalid utf8 plain", chunks: []string{"\xff\xfe\n"}, want: relayResult{Out: "\xff\xfe\n"}},
		{name: "json log line", chunks: []string{`{"level": "info"}` + "\n"}, want: relayResult{Out: `{"level": "info"}` + "\n"}},
		{
			name:   "invalid message passes as text",
			chunks: []string{`{"__dagster_pipes_version": "0.1", "method": "log", "params": {"level": "TRACE", "message": "m"}}` + "\n"},
			want:   relayResult{Out: `{"__dagster_pipes_version": "0.1", "method": "log", "params": {"level": "TRACE", "message": "m"}}` + "\n", Warnings: 1},
		},
		{name: "long plain line in chunks", max: 16, chunks: []string{long[:10], long[10:60], long[60:] + "\nok\n"}, want: relayResult{Out: long + "\nok\n"}},
		{name: "long plain line in one write", max: 16, chunks: []string{long + "\nok\n"}, want: relayResult{Out: long + "\nok\n"}},
		{name: "long message passes as text", max: 32, chunks: []string{testMsg[:20], testMsg[20:] + "\n" + testMsg[:5], testMsg[5:]}, want: relayResult{Out: testMsg + "\n" + testMsg, Warnings: 2}},
		{name: "long message one write", max: 32, chunks: []string{"a\n" + testMsg + "\nb\n"}, want: relayResult{Out: "a\n" + testMsg + "\nb\n", Warnings: 1}},
		{name: "truncated message warns", chunks: []string{testMsg[:40] + "\n"}, want: relayResult{Out: testMsg[:40] + "\n", Warnings: 1}},
		{name: "empty lines", chunks: []string{"\n\n", "\n"}, want: relayResult{Out: "\n\n\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runRelay(t, tt.max, tt.chunks...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRelayEverySplit cuts a mixed stream at every byte and expects the same
// result as one write.
func TestRelayEverySplit(t *testing.T) {
	t.Parallel()
	in := "one\n" + testMsg + "\ntwo \xff\n\n" + testMsg + "\nlast"
	want := runRelay(t, 0, in)
	for i := range len(in) + 1 {
		if diff := cmp.Diff(want, runRelay(t, 0, in[:i], in[i:])); diff != "" {
			t.Fatalf("split at %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestRelayErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := &Relay{Out: io.Discard, OnMessage: func(*Message) error { return boom }}
	if _, err := r.Write([]byte(testMsg + "\n")); !errors.Is(err, boom) {
		t.Errorf("Write = %v, want boom", err)
	}
	r = &Relay{Out: failWriter{}}
	if _, err := r.Write([]byte("x\n")); err == nil {
		t.Error("Write to a failing Out succeeded")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestRelayForwardsThroughSession(t *testing.T) {
	t.Parallel()
	var dagster bytes.Buffer
	s, err := Open(Options{LookupEnv: bootstrapEnv(t, ContextData{AssetKeys: []string{"a/b"}}, StdioMessagesParams("stdout")), Stdout: &dagster})
	if err != nil {
		t.Fatal(err)
	}
	driver := `{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "a/b", "data_version": null, "metadata": {"loss": {"raw_value": 2.0, "type": "float"}}}}`
	r := &Relay{Out: s.Stdout(), OnMessage: func(m *Message) error {
		if m.Method != MethodReportMaterialize {
			return s.Forward(m)
		}
		mat, err := m.Materialization()
		if err != nil {
			return err
		}
		mat.Metadata["ray_job_id"] = Text("raysubmit_1")
		fwd, err := MaterializationMessage(mat)
		if err != nil {
			return err
		}
		return s.Forward(fwd)
	}}
	if _, err := r.ReadFrom(strings.NewReader("epoch 1\n" + driver + "\n" + testMsg + "\nepoch 2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(dagster.String(), "\n"), "\n")
	want := []string{"opened", "plain:epoch 1", "report_asset_materialization", "log", "plain:epoch 2", "closed"}
	var got []string
	for _, l := range lines {
		m, ok, err := ParseMessage([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			got = append(got, "plain:"+l)
			continue
		}
		got = append(got, string(m.Method))
		if m.Method == MethodReportMaterialize && !strings.Contains(l, `"loss":{"raw_value":2.0,"type":"float"}`) {
			t.Errorf("float lost its decimal point: %s", l)
		}
		if m.Method == MethodLog && l != testMsg {
			t.Errorf("forwarded log changed:\n got %s\nwant %s", l, testMsg)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzRelay(f *testing.F) {
	f.Add([]byte("a\nb\n"), uint16(3), uint8(16))
	f.Add([]byte(testMsg+"\nplain\n"), uint16(40), uint8(64))
	f.Add([]byte("{\"__dagster_pipes_version\"\n\xff"), uint16(1), uint8(8))
	f.Fuzz(func(t *testing.T, in []byte, split uint16, max uint8) {
		var out bytes.Buffer
		messages := 0
		r := &Relay{Out: &out, MaxLine: int(max) + 1, OnMessage: func(*Message) error { messages++; return nil }}
		cut := int(split) % (len(in) + 1)
		for _, part := range [][]byte{in[:cut], in[cut:]} {
			if _, err := r.Write(part); err != nil {
				t.Fatal(err)
			}
			if cap(r.carry) > 2*(int(max)+1)+64 {
				t.Fatalf("carry grew to %d with MaxLine %d", cap(r.carry), int(max)+1)
			}
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		if messages == 0 && !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("lost bytes: in %q out %q", in, out.Bytes())
		}
		if messages > 0 && out.Len() >= len(in) {
			t.Fatalf("%d messages but output not shorter", messages)
		}
	})
}

func BenchmarkRelay(b *testing.B) {
	var stream bytes.Buffer
	for i := range 10000 {
		if i%100 == 99 {
			stream.WriteString(testMsg + "\n")
			continue
		}
		fmt.Fprintf(&stream, "(train pid=1234) epoch %d step %d loss=0.%04d lr=3e-4 throughput=812.5 samples/s\n", i/100, i, i)
	}
	data := stream.Bytes()
	const chunk = 32 << 10
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	r := &Relay{Out: io.Discard, OnMessage: func(*Message) error { return nil }}
	for b.Loop() {
		for off := 0; off < len(data); off += chunk {
			if _, err := r.Write(data[off:min(off+chunk, len(data))]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkRelayPlain shows that plain lines cost no allocation.
func BenchmarkRelayPlain(b *testing.B) {
	data := bytes.Repeat([]byte("(train pid=1234) epoch 3 step 17 loss=0.0123 lr=3e-4 {\"json\": true}\n"), 10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	r := &Relay{Out: io.Discard}
	for b.Loop() {
		for off := 0; off < len(data); off += 32 << 10 {
			if _, err := r.Write(data[off:min(off+32<<10, len(data))]); err != nil {
				b.Fatal(err)
			}
		}
	}
}
