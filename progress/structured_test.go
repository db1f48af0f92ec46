package progress

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/runner"
)

// full is an event with every field set.
var full = runner.Event{
	Time: at, Elapsed: 13_345_600 * time.Microsecond, Phase: runner.PhaseReport, Kind: runner.KindResult,
	Message: "ads-ranking-train", Cluster: "raystep-ads-3f2a", SubmissionID: "raystep-ads-3f2a-1",
	DashboardURL: "http://127.0.0.1:8265/?a=1&b=<2>",
	Attrs:        []runner.Attr{{Key: "rows", Value: "200000"}, {Key: "auc", Value: "0.885"}},
}

// TestConsoleJSON checks the JSON format byte for byte.
func TestConsoleJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e    runner.Event
		want string
	}{
		{name: "note", e: event(runner.PhaseProvision, runner.KindNote, "cluster ready"),
			want: `{"time":"2026-12-01T12:00:03.250Z","elapsed_s":3.04,"phase":"provision","kind":"note","message":"cluster ready"}` + "\n"},
		{name: "every field", e: full,
			want: `{"time":"2026-12-01T12:00:03.250Z","elapsed_s":13.346,"phase":"report","kind":"result","message":"ads-ranking-train",` +
				`"cluster":"raystep-ads-3f2a","submission_id":"raystep-ads-3f2a-1","dashboard_url":"http://127.0.0.1:8265/?a=1&b=<2>",` +
				`"attrs":{"rows":"200000","auc":"0.885"}}` + "\n"},
		{name: "escapes", e: event(runner.PhaseRun, runner.KindLog, "a \"b\"\n\tc\x01 \\", runner.Attr{Key: "le\"vel", Value: "info"}),
			want: `{"time":"2026-12-01T12:00:03.250Z","elapsed_s":3.04,"phase":"run","kind":"log","message":"a \"b\"\n\tc\u0001 \\",` +
				`"attrs":{"le\"vel":"info"}}` + "\n"},
		{name: "local time is shown in UTC", e: runner.Event{Time: at.In(time.FixedZone("CET", 3600)), Kind: runner.KindNote},
			want: `{"time":"2026-12-01T12:00:03.250Z","elapsed_s":0,"phase":"","kind":"note","message":""}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := rendered(appendJSON, tt.e)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("json (-want +got):\n%s", diff)
			}
			var back map[string]any
			if err := json.Unmarshal([]byte(got), &back); err != nil {
				t.Errorf("not JSON: %v", err)
			}
			if back["message"] != tt.e.Message {
				t.Errorf("message read back = %q, want %q", back["message"], tt.e.Message)
			}
		})
	}
}

// TestConsoleLogfmt checks the logfmt format byte for byte, above all its
// quoting.
func TestConsoleLogfmt(t *testing.T) {
	t.Parallel()
	const head = "time=2026-12-01T12:00:03.250Z elapsed=3.040s phase=run kind=note "
	note := func(msg string, attrs ...runner.Attr) runner.Event {
		return event(runner.PhaseRun, runner.KindNote, msg, attrs...)
	}
	tests := []struct {
		name string
		e    runner.Event
		want string
	}{
		{name: "bare", e: note("ready"), want: head + "msg=ready\n"},
		{name: "space", e: note("cluster ready"), want: head + `msg="cluster ready"` + "\n"},
		{name: "empty", e: note(""), want: head + `msg=""` + "\n"},
		{name: "quote and backslash", e: note(`say "hi" \o/`), want: head + `msg="say \"hi\" \\o/"` + "\n"},
		{name: "bare backslash", e: note(`C:\tmp`), want: head + `msg=C:\tmp` + "\n"},
		{name: "equals", e: note("a=b"), want: head + `msg="a=b"` + "\n"},
		{name: "newline tab return", e: note("a\nb\tc\rd"), want: head + `msg="a\nb\tc\rd"` + "\n"},
		{name: "control characters", e: note("bell\a nul\x00 del\x7f c1\u0085 ls\u2028"),
			want: head + `msg="bell\u0007 nul\u0000 del\u007f c1\u0085 ls\u2028"` + "\n"},
		{name: "invalid utf-8", e: note("a\xffb"), want: head + "msg=\"a\uFFFDb\"\n"},
		{name: "unicode", e: note("größe→ok"), want: head + "msg=größe→ok\n"},
		{name: "no-break space", e: note("a\u00a0b"), want: head + "msg=\"a\u00a0b\"\n"},
		{name: "attrs", e: note("x", runner.Attr{Key: "raystep/gpu_hours", Value: "0.5"}, runner.Attr{Key: "level", Value: ""}),
			want: head + `msg=x raystep/gpu_hours=0.5 level=""` + "\n"},
		{name: "bad keys", e: note("x", runner.Attr{Key: "a b=\"c\"\n", Value: "1"}, runner.Attr{Key: "", Value: "2"}),
			want: head + `msg=x a_b__c__=1 _=2` + "\n"},
		{name: "every field", e: full, want: "time=2026-12-01T12:00:03.250Z elapsed=13.346s phase=report kind=result msg=ads-ranking-train " +
			`cluster=raystep-ads-3f2a submission_id=raystep-ads-3f2a-1 dashboard_url="http://127.0.0.1:8265/?a=1&b=<2>" rows=200000 auc=0.885` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, rendered(appendLogfmt, tt.e)); diff != "" {
				t.Errorf("logfmt (-want +got):\n%s", diff)
			}
		})
	}
}
