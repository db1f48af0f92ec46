package history

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func record(name string, ended time.Time) Record {
	return Record{Name: name, Kind: "step", Spec: "ads-ranking-train", Backend: "local", ExitCode: 0,
		Reason: Succeeded, Started: ended.Add(-time.Minute), Ended: ended, Phases: map[string]float64{"run": 42}}
}

func TestPutGetList(t *testing.T) {
	t.Parallel()
	d := Dir{Root: t.TempDir()}
	now := time.Now().UTC().Truncate(time.Second)
	for i, name := range []string{"raystep-a-1", "raystep-b-2", "raystep-c-3"} {
		if err := d.Put(record(name, now.Add(time.Duration(i)*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.Get("raystep-b-2")
	if err != nil || got.Name != "raystep-b-2" || got.Version != 1 || got.Phases["run"] != 42 {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	recs, errs := d.List(now.Add(30 * time.Minute))
	if len(errs) != 0 || len(recs) != 2 || recs[0].Name != "raystep-c-3" || recs[1].Name != "raystep-b-2" {
		t.Fatalf("List since +30m = %v, %v; want c then b", names(recs), errs)
	}
	if _, err := d.Get("raystep-nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a step never recorded: %v, want fs.ErrNotExist", err)
	}
}

func names(recs []Record) []string {
	var n []string
	for _, r := range recs {
		n = append(n, r.Name)
	}
	return n
}

// TestNamesThatArePaths: a name with path characters is refused by every
// entry point, and nothing is written outside the root.
func TestNamesThatArePaths(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	d := Dir{Root: filepath.Join(parent, "history")}
	for _, name := range []string{"../escape", "a/b", ".", "..", "", "UPPER", strings.Repeat("a", 64), "x\x00y"} {
		if err := d.Put(record(name, time.Now())); !errors.Is(err, ErrName) {
			t.Errorf("Put(%q) = %v, want ErrName", name, err)
		}
		if _, err := d.Get(name); !errors.Is(err, ErrName) {
			t.Errorf("Get(%q) = %v, want ErrName", name, err)
		}
		if _, err := d.OpenLog(name); !errors.Is(err, ErrName) {
			t.Errorf("OpenLog(%q) = %v, want ErrName", name, err)
		}
		if _, err := d.NewLogWriter(name, 10); !errors.Is(err, ErrName) {
			t.Errorf("NewLogWriter(%q) = %v, want ErrName", name, err)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) > 1 {
		t.Errorf("something was written beside the history: %v", entries)
	}
}

// TestDamagedRecord: a record cut in half is reported by List and Get,
// the others still listed, and Trim removes it once old.
func TestDamagedRecord(t *testing.T) {
	t.Parallel()
	d := Dir{Root: t.TempDir()}
	now := time.Now()
	for _, name := range []string{"raystep-good", "raystep-cut"} {
		if err := d.Put(record(name, now)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(d.Root, "raystep-cut", "record.json")
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	recs, errs := d.List(time.Time{})
	if len(recs) != 1 || recs[0].Name != "raystep-good" || len(errs) != 1 || !strings.Contains(errs[0].Error(), "raystep-cut") {
		t.Fatalf("List = %v, %v; want the good one and an error naming the cut one", names(recs), errs)
	}
	if _, err := d.Get("raystep-cut"); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Get of the cut record: %v", err)
	}
	old := now.Add(-48 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	removed, err := d.Trim(now.Add(-24 * time.Hour))
	if err != nil || len(removed) != 1 || removed[0] != "raystep-cut" {
		t.Errorf("Trim = %v, %v; want the damaged old record only", removed, err)
	}
}

func TestTrimKeepsRecentAndRunning(t *testing.T) {
	t.Parallel()
	d := Dir{Root: t.TempDir()}
	now := time.Now()
	if err := d.Put(record("raystep-old", now.Add(-40*24*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(record("raystep-new", now.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	w, err := d.NewLogWriter("raystep-running", 100)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("still going\n"))
	removed, err := d.Trim(now.Add(-DefaultKeep))
	if err != nil || len(removed) != 1 || removed[0] != "raystep-old" {
		t.Errorf("Trim = %v, %v; want only the 40-day-old record", removed, err)
	}
	w.Close()
	if _, err := d.OpenLog("raystep-running"); err != nil {
		t.Errorf("a running step's log was trimmed: %v", err)
	}
}

// TestLogWriterKeepsFirstAndLast: within the cap the log is kept byte for
// byte; beyond it, the first and last halves with a note of the cut.
func TestLogWriterKeepsFirstAndLast(t *testing.T) {
	t.Parallel()
	d := Dir{Root: t.TempDir()}
	var whole bytes.Buffer
	for i := range 1000 {
		whole.WriteString(strings.Repeat("x", i%7) + "line\n")
	}
	for _, tc := range []struct {
		name  string
		max   int64
		chunk int
	}{{"raystep-fits", int64(whole.Len()), 3}, {"raystep-cut-small", 64, 5}, {"raystep-cut-big", 1000, 4096}, {"raystep-cut-odd", 999, 1}} {
		w, err := d.NewLogWriter(tc.name, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		for p := whole.Bytes(); len(p) > 0; {
			k := min(tc.chunk, len(p))
			if n, err := w.Write(p[:k]); n != k || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			p = p[k:]
		}
		sum := w.Close()
		if w.Err() != nil {
			t.Fatal(w.Err())
		}
		f, _ := d.OpenLog(tc.name)
		got, _ := io.ReadAll(f)
		f.Close()
		if sum.Bytes != int64(whole.Len()) {
			t.Errorf("%s: summary counts %d bytes, the driver wrote %d", tc.name, sum.Bytes, whole.Len())
		}
		if tc.max >= int64(whole.Len()) {
			if !bytes.Equal(got, whole.Bytes()) || sum.Cut() {
				t.Errorf("%s: log within the cap not kept byte for byte (%d of %d bytes)", tc.name, len(got), whole.Len())
			}
			continue
		}
		head, tail := whole.Bytes()[:tc.max/2], whole.Bytes()[whole.Len()-int(tc.max-tc.max/2):]
		if !bytes.HasPrefix(got, head) || !bytes.HasSuffix(got, tail) || !bytes.Contains(got, []byte("bytes of the driver's log left out here")) {
			t.Errorf("%s: cut log lacks its first %d bytes, its last %d or the note:\n%q", tc.name, len(head), len(tail), got)
		}
		if !sum.Cut() || sum.Kept != tc.max {
			t.Errorf("%s: summary %+v, want %d kept and cut", tc.name, sum, tc.max)
		}
	}
}

// TestReapRecordsDeadSteps: a started step whose process is gone without
// a record is recorded as reaped, ended when its log was last written; a
// live one, and one that wrote its record, are left alone.
func TestReapRecordsDeadSteps(t *testing.T) {
	t.Parallel()
	d := Dir{Root: t.TempDir()}
	started := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for name, pid := range map[string]int{"raystep-killed": 1001, "raystep-alive": 1002, "raystep-done": 1001} {
		if err := d.Start(Record{Name: name, Backend: "local", Started: started, PID: pid}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := d.NewLogWriter("raystep-killed", 100)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("epoch 1\n"))
	w.Close()
	lastWrite := started.Add(10 * time.Minute)
	if err := os.Chtimes(filepath.Join(d.Root, "raystep-killed", "driver.log"), lastWrite, lastWrite); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(Record{Name: "raystep-done", Backend: "local", Reason: Succeeded, Started: started, Ended: started}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := d.List(time.Time{}); len(recs) != 1 {
		t.Fatalf("before Reap, List = %v: a running step is listed", names(recs))
	}
	reaped, err := d.Reap(func(pid int) bool { return pid == 1002 }, time.Now())
	if err != nil || len(reaped) != 1 || reaped[0].Name != "raystep-killed" {
		t.Fatalf("Reap = %v, %v; want raystep-killed only", names(reaped), err)
	}
	got, err := d.Get("raystep-killed")
	if err != nil || got.Reason != Reaped || got.ExitCode != -1 || !got.Ended.Equal(lastWrite) || got.Log.Bytes != 8 ||
		!strings.Contains(got.Error, "pid 1001") {
		t.Errorf("reaped record %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(d.Root, "raystep-killed", "running.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the running record is still there after the record was written: %v", err)
	}
	if again, _ := d.Reap(func(int) bool { return false }, time.Now()); len(again) != 1 || again[0].Name != "raystep-alive" {
		t.Errorf("second Reap = %v, want the step whose process died since", names(again))
	}
}

// TestLogWriterShowsLinesWhileBatching: the first line of a quiet job is
// in the file as soon as it is written; a burst after it is batched, and
// its last lines reach the file by themselves, without another write or
// Close, so `raystep logs -f` shows them.
func TestLogWriterShowsLinesWhileBatching(t *testing.T) {
	t.Parallel()
	d := Dir{Root: t.TempDir()}
	w, err := d.NewLogWriter("raystep-batch-1", DefaultLogCap)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	read := func() string {
		b, _ := os.ReadFile(d.LogPath("raystep-batch-1"))
		return string(b)
	}
	fmt.Fprintln(w, "first")
	if got := read(); got != "first\n" {
		t.Fatalf("after the first line the file holds %q", got)
	}
	var want strings.Builder
	want.WriteString("first\n")
	for i := range 1000 {
		fmt.Fprintf(w, "line %d\n", i)
		fmt.Fprintf(&want, "line %d\n", i)
	}
	deadline := time.Now().Add(30 * time.Second) // only catches a tail never written
	for read() != want.String() {
		if time.Now().After(deadline) {
			t.Fatalf("the burst's tail never reached the file: it holds %d bytes of %d", len(read()), want.Len())
		}
		time.Sleep(10 * time.Millisecond) // a file is not a stream
	}
}
