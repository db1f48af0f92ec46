package local

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLost: Lost says why a borrowed cluster is no longer there: its
// expiry passed, its record is gone (down), its supervisor is gone; and
// returns nil when the step ends first.
func TestLost(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		expires time.Time // zero: no record
		want    string
	}{
		{"expired", now.Add(-time.Second), "local cluster dev, which the step borrows, reached its expiry (2026-12-02T00:59:59Z) and stops"},
		{"down", time.Time{}, "local cluster dev, which the step borrows, was brought down"},
		{"supervisor gone", now.Add(time.Hour), "local cluster dev, which the step borrows, is gone: its head no longer runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Clusters{Dir: t.TempDir(), Now: func() time.Time { return now }}
			if !tt.expires.IsZero() {
				b, err := json.Marshal(Interactive{Name: "dev", Owner: "alice", Expires: tt.expires})
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(c.Dir, "dev.json"), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := c.Lost(t.Context(), "dev")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Lost = %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("step ends first", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := (&Clusters{Dir: t.TempDir()}).Lost(ctx, "dev"); err != nil {
			t.Errorf("Lost after the step ended = %v, want nil", err)
		}
	})
}
