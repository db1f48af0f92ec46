package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAskRayQuotesRayWhenItDoesNotAnswer: Ray that keeps trying a GCS it
// cannot reach (RAY_ADDRESS=auto found one only on another interface, or
// the address is some other server) is cut off, and its last warning,
// which names the address it tried, comes with the error.
func TestAskRayQuotesRayWhenItDoesNotAnswer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	said := filepath.Join(dir, "said")
	python := filepath.Join(dir, "python")
	script := "#!/bin/sh\n" +
		"echo 'Traceback (most recent call last):' >&2\n" +
		"echo '[2026-12-07 02:54:20,217 W 14903 14903] rpc_client.h:153: Failed to connect to GCS at address 192.0.2.2:38307 within 5 seconds.' >&2\n" +
		": > " + said + "\n" +
		"exec sleep 600\n"
	if err := os.WriteFile(python, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ray := filepath.Join(dir, "ray")
	if err := os.WriteFile(ray, []byte("#!"+python+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		for {
			if _, err := os.Stat(said); err == nil {
				cancel(errors.New("the test's deadline"))
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	_, err := askRay(ctx, "auto", ray, "", time.Hour)
	want := `ray did not answer within 1h0m0s (its last word: "Failed to connect to GCS at address 192.0.2.2:38307 within 5 seconds."): the test's deadline`
	if err == nil || err.Error() != want {
		t.Errorf("askRay = %v\nwant %s", err, want)
	}
}

func TestRayLastWord(t *testing.T) {
	t.Parallel()
	for stderr, want := range map[string]string{
		"":       "",
		"\n  \n": "",
		"[2026-12-07 02:54:55,223 W 1 1] gcs_client.cc:210: Failed to get cluster ID: TimedOut\n": "Failed to get cluster ID: TimedOut",
		"2026-12-07 02:54:55,223\tINFO worker.py:1 -- Connecting to existing Ray cluster\n":       "2026-12-07 02:54:55,223\tINFO worker.py:1 -- Connecting to existing Ray cluster",
		"[a bracket but no log prefix\n": "[a bracket but no log prefix",
	} {
		if got := rayLastWord(stderr); got != want {
			t.Errorf("rayLastWord(%q) = %q, want %q", stderr, got, want)
		}
	}
}
