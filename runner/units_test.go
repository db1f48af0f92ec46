package runner

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

func TestStepID(t *testing.T) {
	t.Parallel()
	label := regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	base := StepID("ads-ranking-train", "run-1", "ads/model", 0)
	tests := []struct {
		name     string
		id       string
		wantSame bool
		wantName string
	}{
		{"same attempt", StepID("ads-ranking-train", "run-1", "ads/model", 0), true, "ads-ranking-train"},
		{"retry", StepID("ads-ranking-train", "run-1", "ads/model", 1), false, "ads-ranking-train"},
		{"other run", StepID("ads-ranking-train", "run-2", "ads/model", 0), false, "ads-ranking-train"},
		{"other step", StepID("ads-ranking-train", "run-1", "ads/eval", 0), false, "ads-ranking-train"},
		{"other spec", StepID("ads-ranking-eval", "run-1", "ads/model", 0), false, "ads-ranking-eval"},
		{"odd name", StepID("--Ads_Ranking..TRAIN--", "run-1", "ads/model", 0), false, "ads-ranking-train"},
		{"long name", StepID(strings.Repeat("abcdefghij", 8), "run-1", "k", 0), false, "abcdefghijabcdefghijabcdef"},
		{"empty name", StepID("", "run-1", "k", 0), false, "step"},
		{"name cut at a dash", StepID("abcdefghijabcdefghijabcde-fgh", "r", "k", 0), false, "abcdefghijabcdefghijabcde"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.id == base; got != tt.wantSame {
				t.Errorf("%s == %s is %v, want %v", tt.id, base, got, tt.wantSame)
			}
			if len(tt.id) > 47 || !label.MatchString(tt.id) {
				t.Errorf("%q is not a DNS-1035 label of at most 47 characters", tt.id)
			}
			name := strings.TrimSuffix(strings.TrimPrefix(tt.id, "raystep-"), tt.id[len(tt.id)-13:])
			if diff := cmp.Diff(tt.wantName, name); diff != "" {
				t.Errorf("name part (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFloatValue: float metadata keeps its decimal point (Dagster reads
// 2.0 as a float, 2 as an int). The encoder is pipes.Float, which writes
// floats as Python's json module does: 1e21 is 1e+21, as json.dumps says.
func TestFloatValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float64
		want string
	}{
		{2, "2.0"}, {0, "0.0"}, {0.125, "0.125"}, {-3, "-3.0"}, {1e21, "1e+21"}, {3600.5, "3600.5"},
	}
	for _, tt := range tests {
		got, err := json.Marshal(map[string]json.RawMessage{"v": pipes.Float(tt.in).Raw})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(`{"v":`+tt.want+`}`, string(got)); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.in, diff)
		}
	}
	if diff := cmp.Diff("3.0", string(seconds(3*time.Second).Raw)); diff != "" {
		t.Errorf("seconds(3s) (-want +got):\n%s", diff)
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"Job was intentionally stopped.", "Job was intentionally stopped."},
		{"Job entrypoint command failed with exit code 1, last available logs:\nTraceback\n  File x\nValueError: boom\n\n",
			"Job entrypoint command failed with exit code 1, last available logs: ValueError: boom"},
		// On a busy machine the driver's last words can reach Ray's log
		// before Ray's own "Running entrypoint" line does.
		{"Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\ndriver-boom\n" +
			"Running entrypoint for job raystep-x: python -c 'import sys; sys.exit(1)'\n",
			"Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars): driver-boom"},
		{"Job entrypoint command failed with exit code 1, last available logs:\nRunning entrypoint for job raystep-x: false\n",
			"Job entrypoint command failed with exit code 1, last available logs:"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, summarize(tt.in)); diff != "" {
			t.Errorf("summarize(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestUtilizationSummary: a node's mean and peak over the samples, a
// node without GPUs has no GPU figures, and the head comes first.
func TestUtilizationSummary(t *testing.T) {
	var u utilization
	u.add([]NodeSample{{Node: "w1", CPU: 10, Mem: 20, GPU: 50}, {Node: "h (head)", CPU: 5, Mem: 40, GPU: -1}})
	u.add([]NodeSample{{Node: "w1", CPU: 30, Mem: 20, GPU: 100}, {Node: "h (head)", CPU: 15, Mem: 60, GPU: -1}})
	got := u.summary()
	if len(got) != 2 || got[0].Node != "h (head)" || got[1].Node != "w1" {
		t.Fatalf("summary = %+v, want the head then w1", got)
	}
	h, w := got[0], got[1]
	if h.Samples != 2 || h.CPU != (Stat{Mean: 10, Peak: 15}) || h.Mem != (Stat{Mean: 50, Peak: 60}) || h.GPU != nil {
		t.Errorf("head: %+v", h)
	}
	if w.GPU == nil || *w.GPU != (Stat{Mean: 75, Peak: 100}) || w.CPU != (Stat{Mean: 20, Peak: 30}) {
		t.Errorf("w1: %+v (gpu %+v)", w, w.GPU)
	}
	var none utilization
	if s := none.summary(); len(s) != 0 {
		t.Errorf("no samples: %+v", s)
	}
}
