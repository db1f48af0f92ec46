package schemas

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestImagePolicyAllowed(t *testing.T) {
	t.Parallel()
	p := ImagePolicy{Allow: []string{"rayproject/ray:2.*", "registry.example.com/ml/*"}}
	tests := []struct {
		image string
		want  bool
	}{
		{"rayproject/ray:2.60.0-py311", true},
		{"rayproject/ray:1.13.0", false},
		{"registry.example.com/ml/ray/custom:1", true},
		{"registry.example.com/other:1", false},
		{"docker.io/rayproject/ray:2.60.0", false},
	}
	for _, tt := range tests {
		if got := p.Allowed(tt.image); got != tt.want {
			t.Errorf("Allowed(%q) = %v, want %v", tt.image, got, tt.want)
		}
	}
}

func TestParseProfileErrors(t *testing.T) {
	t.Parallel()
	src := `apiVersion: raystep.dev/v1alpha1
kind: PlatformProfile
metadata: {name: p}
spec:
  namespace: ml
  images: {allow: []}
  gpuTypes:
    a100:
      resourceName: "nvidia gpu"
      nodeSelector: {pool: a100}
      tolerations: [{key: k, operator: Maybe}]
    l4:
      resourceName: nvidia.com/gpu
      nodeSelector: {pool: l4}
      tolerations: [{operator: Exists, value: v}, {value: v}]
  nodePools: {}
`
	_, err := ParseProfile("p.yaml", []byte(src))
	var ve *ValidationErrors
	if !errors.As(err, &ve) {
		t.Fatalf("ParseProfile = %v", err)
	}
	var got []string
	for _, e := range ve.Errors {
		got = append(got, e.Pointer)
	}
	want := []string{
		"/spec/images/allow", "/spec/gpuTypes/a100/resourceName", "/spec/gpuTypes/a100/tolerations/0/operator",
		"/spec/gpuTypes/l4/tolerations/0/value", "/spec/gpuTypes/l4/tolerations/1/key", "/spec/nodePools",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pointers (-want +got):\n%s\n%v", diff, err)
	}
}

func TestDefaultProfileSecurity(t *testing.T) {
	t.Parallel()
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	s := p.Spec.PodSecurity
	got := []any{*s.RunAsNonRoot, *s.AllowPrivilegeEscalation, s.DropCapabilities, s.SeccompProfile}
	want := []any{true, false, []string{"ALL"}, "RuntimeDefault"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod security (-want +got):\n%s", diff)
	}
}

// TestDefaultProfileMatchesSchema checks the built-in profile against the
// profile schema, which DefaultProfile skips at run time, and that it
// loads the same with the schema as without.
func TestDefaultProfileMatchesSchema(t *testing.T) {
	t.Parallel()
	checked, err := ParseProfile("(built-in)", DefaultProfileYAML())
	if err != nil {
		t.Fatalf("the built-in profile does not match the profile schema: %v", err)
	}
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(checked, p); diff != "" {
		t.Errorf("DefaultProfile (-with schema +without):\n%s", diff)
	}
}
