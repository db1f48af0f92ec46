package schemas

import (
	"errors"
	"fmt"
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

// TestProfileGivenASpec: a job spec given as the profile is one error
// that says what it is and where it goes, not a list of every key.
func TestProfileGivenASpec(t *testing.T) {
	t.Parallel()
	_, err := LoadProfile("../examples/ads_ranking/train.yaml")
	var ve *ValidationErrors
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Pointer != "/kind" ||
		!strings.Contains(ve.Errors[0].Message, "this is a raystep job spec (kind RayStep), not a raystep platform profile: pass it with -f") {
		t.Errorf("LoadProfile(a job spec) = %v, want one error at /kind saying to pass it with -f", err)
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
	checked.Builtin = true
	if diff := cmp.Diff(checked, p); diff != "" {
		t.Errorf("DefaultProfile (-with schema +without):\n%s", diff)
	}
}

const placedSpec = `apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata:
  name: placed
  owner: me
spec:
  kind: eval
  entrypoint: python x.py
  cluster:
    rayVersion: "2.60.0"
    image: rayproject/ray:2.60.0
`

// TestBuiltinProfileLeavesTheNamespaceToTheKubeconfig: the built-in
// profile's namespace (default) places no spec, so the kubeconfig
// context's comes first; a profile someone passes places every spec that
// names no namespace of its own.
func TestBuiltinProfileLeavesTheNamespaceToTheKubeconfig(t *testing.T) {
	t.Parallel()
	builtin, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	chosen, err := ParseProfile("platform.yaml", DefaultProfileYAML())
	if err != nil {
		t.Fatal(err)
	}
	if !builtin.Builtin || chosen.Builtin {
		t.Errorf("Builtin: DefaultProfile %v, a parsed profile %v; want true, false", builtin.Builtin, chosen.Builtin)
	}
	spec := func(p *Profile, namespace string) string {
		t.Helper()
		data := strings.Replace(placedSpec, "metadata:\n", "metadata:\n"+namespace, 1)
		s, err := Parse("step.yaml", []byte(data), LoadOptions{Profile: p})
		if err != nil {
			t.Fatal(err)
		}
		return s.Metadata.Namespace
	}
	got := []string{builtin.Namespace(), chosen.Namespace(), spec(builtin, ""), spec(chosen, ""),
		spec(builtin, "  namespace: ml\n"), spec(chosen, "  namespace: ml\n")}
	want := []string{"", "default", "", "default", "ml", "ml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("profile namespaces, then a spec's without and with its own, built-in and chosen (-want +got):\n%s", diff)
	}
}

// TestRayAuthNeedsRay252: token auth is on by default wherever the
// cluster's Ray has it (2.52.0 and newer); below that a spec still
// validates, with a warning at its rayVersion. A profile that asks for
// token auth refuses the older Ray instead; one that turns it off warns,
// at its own field, and its specs say nothing.
func TestRayAuthNeedsRay252(t *testing.T) {
	t.Parallel()
	profile := func(mode string) *Profile {
		t.Helper()
		line := ""
		if mode != "" {
			line = "  rayAuth: {mode: " + mode + "}\n"
		}
		p, err := ParseProfile("auth.yaml", []byte(`apiVersion: raystep.dev/v1alpha1
kind: PlatformProfile
metadata: {name: auth}
spec:
  namespace: ml
  images: {allow: ["rayproject/ray:*"]}
  gpuTypes: {a100: {resourceName: nvidia.com/gpu, nodeSelector: {pool: a100}}}
`+line))
		if err != nil {
			t.Fatal(err)
		}
		return p
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
	const tooOld = `s.yaml: /spec/cluster/rayVersion: Ray %s has no token authentication, which profile auth turns on (spec.rayAuth.mode: token): use rayVersion 2.52.0 or newer`
	const offBelow = `s.yaml: /spec/cluster/rayVersion: warning: Ray %s has no token authentication: on KubeRay this cluster runs without it, and anything that reaches its head service can submit jobs (use rayVersion 2.52.0 or newer)`
	tests := []struct {
		mode, version, err, warning string
		on                          bool
	}{
		{"token", "2.51.9", tooOld, "", true},
		{"token", "1.60.0", tooOld, "", true},
		{"token", "2.52.0", "", "", true},
		{"token", "3.0.0", "", "", true},
		{"", "2.51.9", "", offBelow, false},
		{"", "1.60.0", "", offBelow, false},
		{"", "2.52.0", "", "", true},
		{"", "2.60.0", "", "", true},
		{"", "10.0.0", "", "", true},
		{"disabled", "2.51.9", "", "", false},
		{"disabled", "2.60.0", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.mode+"/"+tt.version, func(t *testing.T) {
			p := profile(tt.mode)
			if got := p.Spec.RayAuth.On(tt.version); got != tt.on {
				t.Errorf("On(%s) = %v, want %v", tt.version, got, tt.on)
			}
			s, err := Parse("s.yaml", spec(tt.version), LoadOptions{Profile: p})
			if tt.err != "" {
				if want := fmt.Sprintf(tt.err, tt.version); err == nil || err.Error() != want {
					t.Errorf("Parse = %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, w := range s.Warnings {
				got = append(got, w.Error())
			}
			var want []string
			if tt.warning != "" {
				want = []string{fmt.Sprintf(tt.warning, tt.version)}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
	for mode, want := range map[string]string{
		"":         "",
		"token":    "",
		"disabled": "auth.yaml: /spec/rayAuth/mode: warning: Ray's token authentication is off on every KubeRay cluster",
	} {
		var got string
		for _, w := range profile(mode).Warnings() {
			got += w.Error()
		}
		if !strings.HasPrefix(got, want) || (want == "") != (got == "") {
			t.Errorf("profile with mode %q: Warnings() = %q, want it to start with %q", mode, got, want)
		}
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
