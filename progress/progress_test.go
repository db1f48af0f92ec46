package progress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/raystep/raystep/runner"
)

// at is an event's time in the renderer tests.
var at = time.Date(2026, 12, 1, 12, 0, 3, 250_000_000, time.UTC)

// event is a test event of kind in phase, 3.04s into the step.
func event(phase runner.Phase, kind runner.EventKind, msg string, attrs ...runner.Attr) runner.Event {
	return runner.Event{Time: at, Elapsed: 3040 * time.Millisecond, Phase: phase, Kind: kind, Message: msg, Attrs: attrs}
}

// rendered is what render makes of e.
func rendered(render func(*bytes.Buffer, runner.Event), e runner.Event) string {
	var b bytes.Buffer
	render(&b, e)
	return b.String()
}

// result is a result event with its metadata.
var result = event(runner.PhaseReport, runner.KindResult, "ads-ranking-train (data version 279ef395)",
	runner.Attr{Key: "auc", Value: "0.885"}, runner.Attr{Key: "raystep/duration_run_s", Value: "5.024"})

// TestConsoleText checks the text format byte for byte: the lines the
// runner printed before it emitted events.
func TestConsoleText(t *testing.T) {
	t.Parallel()
	long := runner.Event{Elapsed: 12345678 * time.Millisecond, Phase: runner.PhaseTeardown, Kind: runner.KindNote, Message: "x"}
	tests := []struct {
		name string
		e    runner.Event
		want string
	}{
		{name: "note", e: event(runner.PhaseProvision, runner.KindNote, "cluster 127.0.0.1:38595 ready"),
			want: "[    3.0s] provision  cluster 127.0.0.1:38595 ready\n"},
		{name: "warning", e: event(runner.PhaseRun, runner.KindWarning, "log stream broke"),
			want: "[    3.0s] run !      log stream broke\n"},
		{name: "long warning tag", e: event(runner.PhaseProvision, runner.KindWarning, "slow"),
			want: "[    3.0s] provision ! slow\n"},
		{name: "done", e: event(runner.PhaseReport, runner.KindDone, "job j SUCCEEDED in 3.0s"),
			want: "[    3.0s] done       job j SUCCEEDED in 3.0s\n"},
		{name: "failed", e: event(runner.PhaseRun, runner.KindFailed, "ray job FAILED"),
			want: "[    3.0s] failed     ray job FAILED\n"},
		{name: "log", e: event(runner.PhaseRun, runner.KindLog, "epoch 1/3", runner.Attr{Key: "level", Value: "warning"}),
			want: "[    3.0s] log        WARNING epoch 1/3\n"},
		{name: "log without level", e: event(runner.PhaseRun, runner.KindLog, "epoch 1/3"),
			want: "[    3.0s] log        INFO epoch 1/3\n"},
		{name: "check", e: event(runner.PhaseRun, runner.KindCheck, "auc_floor on ads: passed"),
			want: "[    3.0s] check      auc_floor on ads: passed\n"},
		{name: "message", e: event(runner.PhaseRun, runner.KindMessage, `{"a":1}`),
			want: "[    3.0s] message    {\"a\":1}\n"},
		{name: "result", e: result, want: "[    3.0s] result     ads-ranking-train (data version 279ef395)\n" +
			"                      auc                     0.885\n" +
			"                      raystep/duration_run_s  5.024\n"},
		{name: "result without metadata", e: event(runner.PhaseReport, runner.KindResult, "ads"),
			want: "[    3.0s] result     ads\n"},
		{name: "wide elapsed", e: long, want: "[12345.7s] teardown   x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, rendered(appendText, tt.e)); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConsoleColour checks the terminal's colours: the elapsed time dimmed,
// the tag by the event's kind, a result's metadata plain.
func TestConsoleColour(t *testing.T) {
	t.Parallel()
	dim := ansiDim + "[    3.0s]" + ansiReset + " "
	tests := []struct {
		name string
		e    runner.Event
		want string
	}{
		{name: "note", e: event(runner.PhaseProvision, runner.KindNote, "cluster ready"),
			want: dim + ansiCyan + "provision  " + ansiReset + "cluster ready\n"},
		{name: "done", e: event(runner.PhaseReport, runner.KindDone, "job SUCCEEDED"),
			want: dim + ansiBold + ansiGreen + "done       " + ansiReset + "job SUCCEEDED\n"},
		{name: "failed", e: event(runner.PhaseRun, runner.KindFailed, "ray job FAILED"),
			want: dim + ansiBold + ansiRed + "failed     " + ansiReset + "ray job FAILED\n"},
		{name: "warning", e: event(runner.PhaseRun, runner.KindWarning, "log stream broke"),
			want: dim + ansiYellow + "run !      " + ansiReset + "log stream broke\n"},
		{name: "a done note is a note", e: event(runner.PhaseRun, runner.KindNote, "done"),
			want: dim + ansiCyan + "run        " + ansiReset + "done\n"},
		{name: "log", e: event(runner.PhaseRun, runner.KindLog, "hi", runner.Attr{Key: "level", Value: "error"}),
			want: dim + ansiCyan + "log        " + ansiReset + "ERROR hi\n"},
		{name: "result", e: result, want: dim + ansiCyan + "result     " + ansiReset + "ads-ranking-train (data version 279ef395)\n" +
			"                      auc                     0.885\n" +
			"                      raystep/duration_run_s  5.024\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, rendered(appendColour, tt.e)); diff != "" {
				t.Errorf("colour (-want +got):\n%s", diff)
			}
		})
	}
}

// writes records every Write it is given, unlocked: the race detector
// catches a console that writes from two goroutines at once.
type writes struct{ calls []string }

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

// TestConsoleConcurrentEvents emits from many goroutines, as backends do:
// every event arrives whole, in one Write, in every format.
func TestConsoleConcurrentEvents(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json", "logfmt"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			render, err := renderer(format, func() bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			w := &writes{}
			c := &console{w: w, render: render}
			const goroutines, each = 16, 50
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range each {
						c.Event(event(runner.PhaseRun, runner.KindNote, fmt.Sprintf("goroutine %d event %d %s", g, i, strings.Repeat("x", 200))))
					}
				})
			}
			wg.Wait()
			if len(w.calls) != goroutines*each {
				t.Fatalf("%d writes, want %d", len(w.calls), goroutines*each)
			}
			seen := map[string]bool{}
			for _, call := range w.calls {
				if strings.Count(call, "\n") != 1 || !strings.HasSuffix(call, "\n") {
					t.Fatalf("write %q is not one whole line", call)
				}
				seen[call] = true
			}
			if len(seen) != goroutines*each {
				t.Errorf("%d distinct lines, want %d", len(seen), goroutines*each)
			}
		})
	}
}

// failingWriter fails every write.
type failingWriter struct{ n int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.n++
	return 0, errors.New("broken pipe")
}

// TestConsoleWriteFails: a console nobody reads any more loses lines but
// neither panics nor stops trying.
func TestConsoleWriteFails(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json", "logfmt"} {
		render, err := renderer(format, func() bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		w := &failingWriter{}
		c := &console{w: w, render: render}
		c.Event(result)
		c.Event(event(runner.PhaseRun, runner.KindDone, "ok"))
		if w.n != 2 {
			t.Errorf("%s: %d writes tried, want 2", format, w.n)
		}
	}
}

// openPty opens a pseudo-terminal and returns its terminal side.
func openPty(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = ptmx.Close() })
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("number the pseudo-terminal: %v", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the terminal side: %v", err)
	}
	t.Cleanup(func() { _ = tty.Close() })
	return tty
}

// TestIsTerminal: a pseudo-terminal is one; a pipe, a file, a buffer and
// the null device are not.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = r.Close(), w.Close() })
	file, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = file.Close() })
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = null.Close() })
	if !IsTerminal(openPty(t)) {
		t.Error("a pseudo-terminal is not a terminal")
	}
	for name, w := range map[string]io.Writer{"pipe": w, "file": file, "buffer": &bytes.Buffer{}, "null device": null} {
		if IsTerminal(w) {
			t.Errorf("a %s is a terminal", name)
		}
	}
}

// TestFormatChoice checks which renderer each format chooses, on a
// terminal and off one, with and without NO_COLOR.
func TestFormatChoice(t *testing.T) {
	t.Parallel()
	tty := openPty(t)
	tests := []struct {
		format  string
		noColor bool
		tty     bool
		want    func(*bytes.Buffer, runner.Event)
	}{
		{format: "", want: appendText},
		{format: "", tty: true, want: appendColour},
		{format: "auto", noColor: true, tty: true, want: appendText},
		{format: "auto", tty: true, want: appendColour},
		{format: "text", tty: true, want: appendText},
		{format: "json", tty: true, want: appendJSON},
		{format: "logfmt", want: appendLogfmt},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q tty=%v noColor=%v", tt.format, tt.tty, tt.noColor), func(t *testing.T) {
			t.Parallel()
			var w io.Writer = &bytes.Buffer{}
			if tt.tty {
				w = tty
			}
			sink, err := New(w, tt.format, tt.noColor)
			if err != nil {
				t.Fatal(err)
			}
			c := sink.(*console)
			if c.w != w {
				t.Errorf("the console writes to %v, want %v", c.w, w)
			}
			if diff := cmp.Diff(rendered(tt.want, result), rendered(c.render, result)); diff != "" {
				t.Errorf("rendered (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFormatUnknown: any other format is refused with the choices.
func TestFormatUnknown(t *testing.T) {
	t.Parallel()
	if _, err := New(&bytes.Buffer{}, "yaml", false); err == nil || err.Error() != "want auto, text, json or logfmt" {
		t.Errorf("New(yaml) = %v, want the choices", err)
	}
}
