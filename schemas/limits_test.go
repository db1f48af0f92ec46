package schemas

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validHead is a valid spec up to its runtimeEnv.
const validHead = `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: limits, owner: me}
spec:
  kind: train
  entrypoint: python x.py
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
  runtimeEnv:
`

// aliases defines &a as value and uses it n times as env vars.
func aliases(value string, n int) string {
	var b strings.Builder
	b.WriteString(validHead + "    env_vars:\n      V: &a " + value + "\n")
	for i := range n {
		b.WriteString("      A" + strings.Repeat("x", i+1) + ": *a\n")
	}
	return b.String()
}

func TestLimits(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 60_000)
	tests := []struct {
		name, spec, want string
	}{
		{
			name: "binary file over the size limit", spec: "\x7fELF\x02\x01\x01\x00" + strings.Repeat("\xff", MaxFileBytes),
			want: "spec.yaml: is a binary file, not a YAML or JSON spec (it contains NUL bytes)",
		},
		{
			name: "text file over the size limit", spec: strings.Repeat("a", MaxFileBytes+1),
			want: "spec.yaml: is larger than 128 KiB, the most raystep reads",
		},
		{
			name: "UTF-16", spec: "\xff\xfea\x00",
			want: "spec.yaml: is UTF-16 text; save it as UTF-8",
		},
		{
			name: "control character in a key", spec: validHead + "    env_vars: {\"A\\x01\": x}\n",
			want: `spec.yaml: "/spec/runtimeEnv/env_vars/A\x01": the key contains the control character U+0001, which is not allowed`,
		},
		{
			name: "newline in an env var is fine, a bell is not", spec: validHead + "    env_vars: {A: \"x\\ny\", B: \"\\a\"}\n",
			want: "spec.yaml: /spec/runtimeEnv/env_vars/B: contains the control character U+0007, which Ray and Kubernetes do not accept",
		},
		{
			name: "env var name with =", spec: validHead + "    env_vars: {\"A=B\": x, \"\": y}\n",
			want: "spec.yaml: /spec/runtimeEnv/env_vars/A=B: \"A=B\" is not an environment variable name: it must be non-empty and without '='\n" +
				"spec.yaml: /spec/runtimeEnv/env_vars/: \"\" is not an environment variable name: it must be non-empty and without '='",
		},
		{
			name: "env var too long", spec: validHead + "    env_vars: {A: " + big + big + "}\n",
			want: "spec.yaml: /spec/runtimeEnv/env_vars/A: is 117 KiB as NAME=value; at most 64 KiB per variable",
		},
		{
			name: "aliases past the text budget", spec: aliases(big, 20),
			want: "spec.yaml: /spec/runtimeEnv/env_vars/Axxxxxxxxxxxxxxxxx: line 27: alias *a repeats so much that the spec holds " +
				"more than 1 MiB of text; raystep reads at most 1 MiB (each use of an alias counts its whole value again)",
		},
		{
			name: "annotations", spec: strings.Replace(validHead, "owner: me}", "owner: me, annotations: {a: &a "+big+
				", b: *a, c: *a, d: *a, e: *a}}", 1) + "    {}\n",
			want: "spec.yaml: /metadata/annotations: are 292 KiB together; Kubernetes allows at most 256 KiB",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("spec.yaml", []byte(tt.spec), LoadOptions{})
			var ve *ValidationErrors
			if !errors.As(err, &ve) {
				t.Fatalf("Parse = %v, want *ValidationErrors", err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// blockingReader blocks until its test ends, as a pipe that never closes.
type blockingReader struct{ done <-chan struct{} }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.done
	return 0, io.EOF
}

func TestLoadContextReturnsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("received terminated")
	done := make(chan error, 1)
	go func() {
		_, err := LoadContext(ctx, "-", LoadOptions{Stdin: blockingReader{t.Context().Done()}})
		done <- err
	}()
	cancel(cause)
	select {
	case err := <-done:
		if !errors.Is(err, cause) || err.Error() != "load <stdin>: received terminated" {
			t.Errorf("LoadContext = %v, want it to wrap %v", err, cause)
		}
	case <-time.After(time.Minute):
		t.Fatal("LoadContext did not return within a minute of its context being cancelled")
	}
}
