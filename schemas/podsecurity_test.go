package schemas

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProfilePodSecurityRestricted: every podSecurity setting that would
// break the restricted Pod Security Standard is refused, naming the file,
// the field and what restricted requires; groups (also 0) and a
// restricted setting pass.
func TestProfilePodSecurityRestricted(t *testing.T) {
	t.Parallel()
	const head = `apiVersion: raystep.dev/v1alpha1
kind: PlatformProfile
metadata: {name: p}
spec:
  namespace: ml
  images: {allow: ["rayproject/ray:*"]}
  gpuTypes: {l4: {resourceName: nvidia.com/gpu, nodeSelector: {pool: l4}}}
  podSecurity:
`
	tests := []struct {
		name, podSecurity string
		want              []string
	}{
		{"restricted", "    {runAsNonRoot: true, runAsUser: 1000, runAsGroup: 0, fsGroup: 0, allowPrivilegeEscalation: false, dropCapabilities: [NET_RAW, ALL], seccompProfile: RuntimeDefault}", nil},
		{"defaults", "    {}", nil},
		{"runAsNonRoot false", "    runAsNonRoot: false", []string{
			`p.yaml: /spec/podSecurity/runAsNonRoot: false lets the containers run as root: the restricted Pod Security Standard requires runAsNonRoot true`}},
		{"root", "    runAsUser: 0", []string{
			`p.yaml: /spec/podSecurity/runAsUser: 0 is root: the restricted Pod Security Standard requires a runAsUser other than 0`}},
		{"privilege escalation", "    allowPrivilegeEscalation: true", []string{
			`p.yaml: /spec/podSecurity/allowPrivilegeEscalation: true lets a process gain privileges: the restricted Pod Security Standard requires allowPrivilegeEscalation false`}},
		{"capabilities kept", "    dropCapabilities: []", []string{
			`p.yaml: /spec/podSecurity/dropCapabilities: [] keeps capabilities: the restricted Pod Security Standard requires dropCapabilities to hold ALL`}},
		{"some capabilities dropped", "    dropCapabilities: [NET_RAW, SYS_ADMIN]", []string{
			`p.yaml: /spec/podSecurity/dropCapabilities: [NET_RAW, SYS_ADMIN] keeps capabilities: the restricted Pod Security Standard requires dropCapabilities to hold ALL`}},
		{"seccomp off", "    seccompProfile: Unconfined", []string{
			`p.yaml: /spec/podSecurity/seccompProfile: Unconfined turns seccomp off: the restricted Pod Security Standard requires seccompProfile RuntimeDefault`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseProfile("p.yaml", []byte(head+tt.podSecurity+"\n"))
			var got []string
			var ve *ValidationErrors
			switch {
			case errors.As(err, &ve):
				for _, e := range ve.Errors {
					got = append(got, e.Error())
				}
			case err != nil:
				t.Fatalf("ParseProfile: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
