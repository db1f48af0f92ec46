package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"

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

// TestRayAuthNeedsRay252: a profile that turns on token auth refuses a
// spec whose Ray is older than 2.52.0, at the spec's rayVersion, and
// takes 2.52.0 and newer.
func TestRayAuthNeedsRay252(t *testing.T) {
	t.Parallel()
	profile, err := ParseProfile("auth.yaml", []byte(`apiVersion: raystep.dev/v1alpha1
kind: PlatformProfile
metadata: {name: auth}
spec:
  namespace: ml
  images: {allow: ["rayproject/ray:*"]}
  gpuTypes: {a100: {resourceName: nvidia.com/gpu, nodeSelector: {pool: a100}}}
  rayAuth: {mode: token}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !profile.Spec.RayAuth.Token() {
		t.Fatalf("rayAuth = %+v, want token", profile.Spec.RayAuth)
	}
	spec := func(v string) []byte {
		return []byte(`apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: s, owner: o}
spec:
  kind: train
  entrypoint: python t.py
  cluster: {rayVersion: "` + v + `", image: "rayproject/ray:` + v + `", head: {cpus: 1, memory: 1Gi}}
`)
	}
	tests := []struct {
		version, want string
	}{
		{"2.51.9", `s.yaml: /spec/cluster/rayVersion: Ray 2.51.9 has no token authentication, which profile auth turns on (spec.rayAuth.mode: token): use rayVersion 2.52.0 or newer`},
		{"1.60.0", `s.yaml: /spec/cluster/rayVersion: Ray 1.60.0 has no token authentication, which profile auth turns on (spec.rayAuth.mode: token): use rayVersion 2.52.0 or newer`},
		{"2.52.0", ""},
		{"2.60.0", ""},
		{"3.0.0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			_, err := Parse("s.yaml", spec(tt.version), LoadOptions{Profile: profile})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Parse = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := ParseProfile("bad.yaml", []byte(`apiVersion: raystep.dev/v1alpha1
kind: PlatformProfile
metadata: {name: bad}
spec: {namespace: ml, images: {allow: ["*"]}, gpuTypes: {a: {resourceName: r, nodeSelector: {p: a}}}, rayAuth: {mode: tokens}}
`)); err == nil || !strings.Contains(err.Error(), "/spec/rayAuth/mode") {
		t.Errorf("ParseProfile with mode tokens = %v, want an error at /spec/rayAuth/mode", err)
	}
}

// TestInteractiveTTL: spec.interactive.ttl defaults to 8h with a 24h
// maximum, takes the profile's values, and refuses bad durations and a
// default over the maximum.
func TestInteractiveTTL(t *testing.T) {
	t.Parallel()
	base := "apiVersion: raystep.dev/v1alpha1\nkind: PlatformProfile\nmetadata: {name: p}\nspec:\n  namespace: ml\n" +
		"  images: {allow: [\"rayproject/ray:*\"]}\n  gpuTypes: {a100: {resourceName: nvidia.com/gpu, nodeSelector: {pool: a100}}}\n"
	tests := []struct {
		name, interactive string
		def, max          time.Duration
		errs              []string
	}{
		{name: "built-in", def: 8 * time.Hour, max: 24 * time.Hour},
		{name: "profile's", interactive: "{ttl: {default: 2h, max: 12h}}", def: 2 * time.Hour, max: 12 * time.Hour},
		{name: "only max", interactive: "{ttl: {max: 4h}}", def: 4 * time.Hour, max: 4 * time.Hour},
		{name: "bad duration", interactive: "{ttl: {default: soon}}",
			errs: []string{`p.yaml: /spec/interactive/ttl/default: "soon" is not a duration (e.g. 90s, 15m, 24h)`}},
		{name: "default over max", interactive: "{ttl: {default: 10h, max: 5h}}",
			errs: []string{"p.yaml: /spec/interactive/ttl/default: 10h0m0s is longer than max 5h0m0s"}},
		{name: "unknown key", interactive: "{ttl: {min: 1h}}",
			errs: []string{`p.yaml: /spec/interactive/ttl/min: unknown key "min" (did you mean "max"?)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := base
			if tt.interactive != "" {
				src += "  interactive: " + tt.interactive + "\n"
			}
			p, err := ParseProfile("p.yaml", []byte(src))
			if tt.errs != nil {
				var ve *ValidationErrors
				if !errors.As(err, &ve) {
					t.Fatalf("ParseProfile = %v, want validation errors", err)
				}
				if diff := cmp.Diff(tt.errs, strings.Split(ve.Error(), "\n")); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			def, limit := p.Spec.Interactive.TTLs()
			if def != tt.def || limit != tt.max {
				t.Errorf("TTLs() = %s, %s; want %s, %s", def, limit, tt.def, tt.max)
			}
		})
	}
}
