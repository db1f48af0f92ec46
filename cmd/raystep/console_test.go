package main

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestColorWriter(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{
			name: "phase", in: "[    3.0s] provision  cluster ready\n",
			want: ansiDim + "[    3.0s]" + ansiReset + " " + ansiCyan + "provision  " + ansiReset + "cluster ready\n",
		},
		{
			name: "done", in: "[   26.3s] done       job SUCCEEDED\n",
			want: ansiDim + "[   26.3s]" + ansiReset + " " + ansiBold + ansiGreen + "done       " + ansiReset + "job SUCCEEDED\n",
		},
		{
			name: "failed", in: "[    1.0s] failed     ray job FAILED\n",
			want: ansiDim + "[    1.0s]" + ansiReset + " " + ansiBold + ansiRed + "failed     " + ansiReset + "ray job FAILED\n",
		},
		{
			name: "warning", in: "[    1.0s] run !      log stream broke\n",
			want: ansiDim + "[    1.0s]" + ansiReset + " " + ansiYellow + "run !      " + ansiReset + "log stream broke\n",
		},
		{name: "metadata line", in: "                      auc  0.88\n", want: "                      auc  0.88\n"},
		{name: "short", in: "x\n", want: "x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			n, err := (&colorWriter{w: &b}).Write([]byte(tt.in))
			if err != nil || n != len(tt.in) {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(tt.in))
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("coloured (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConsoleIsPlainWhenNotATerminal(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	a := &app{stderr: &b, cfg: &config{}}
	if got := a.console(); got != &b {
		t.Errorf("console() = %T, want the plain stderr buffer", got)
	}
}

func TestAbortOf(t *testing.T) {
	t.Parallel()
	if ch := abortOf(context.Background()); ch != nil {
		t.Errorf("abortOf(no abort) = %v, want nil", ch)
	}
	abort := make(chan struct{})
	ctx := withAbort(context.Background(), abort)
	close(abort)
	select {
	case <-abortOf(ctx):
	default:
		t.Error("abortOf(ctx) is not the channel given to withAbort")
	}
}

// TestSignalContext sends this process SIGTERM twice: the first cancels
// the context with the signal as cause, the second closes abort.
func TestSignalContext(t *testing.T) {
	ctx, stop := signalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the first SIGTERM did not cancel the context")
	}
	if code := exitCode(ctx, context.Cause(ctx)); code != exitSIGTERM {
		t.Errorf("exit code = %d, want %d", code, exitSIGTERM)
	}
	select {
	case <-abortOf(ctx):
		t.Fatal("abort closed after one signal")
	default:
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-abortOf(ctx):
	case <-time.After(time.Minute):
		t.Fatal("the second SIGTERM did not close abort")
	}
}
