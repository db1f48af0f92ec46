package rayhead

import "testing"

func TestRetryableStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, out string
		want      bool
	}{
		{"port taken", "OSError: [Errno 98] Address already in use", true},
		{"bind failed", "Failed to bind to address 127.0.0.1:41234", true},
		{"raylet registered too late", "Exception: The current node timed out during startup. This could happen because", true},
		{"bad flag", "Error: No such option: --bogus", false},
		{"nothing", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retryableStart(tt.out); got != tt.want {
				t.Errorf("retryableStart(%q) = %v, want %v", tt.out, got, tt.want)
			}
		})
	}
}
