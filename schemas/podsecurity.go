package schemas

import (
	"slices"
	"strings"
)

// restricted names the Pod Security Standard a profile's podSecurity must
// meet in every message that refuses one.
const restricted = "the restricted Pod Security Standard requires"

// checkPodSecurity refuses a podSecurity that would make the Ray pods
// break the restricted Pod Security Standard, which the API server
// enforces in namespaces labelled pod-security.kubernetes.io/enforce=restricted:
// the step would otherwise create a RayJob whose pods KubeRay can never
// start there. The profile cannot ask for privileged containers, added
// capabilities, host namespaces or volumes other than raystep's own
// memory-backed emptyDir at all; what it can weaken is refused here with
// what restricted requires. runAsGroup and fsGroup may be any group,
// also 0: restricted does not constrain them.
func checkPodSecurity(file string, pos positions, errs *ValidationErrors, v any) {
	const base = "/spec/podSecurity"
	ps, _ := v.(map[string]any)
	if b, ok := ps["runAsNonRoot"].(bool); ok && !b {
		errs.add(file, pos, base+"/runAsNonRoot", "false lets the containers run as root: %s runAsNonRoot true", restricted)
	}
	if u, ok := intOf(ps["runAsUser"]); ok && u == 0 {
		errs.add(file, pos, base+"/runAsUser", "0 is root: %s a runAsUser other than 0", restricted)
	}
	if b, ok := ps["allowPrivilegeEscalation"].(bool); ok && b {
		errs.add(file, pos, base+"/allowPrivilegeEscalation", "true lets a process gain privileges: %s allowPrivilegeEscalation false", restricted)
	}
	if list, ok := ps["dropCapabilities"].([]any); ok && !slices.ContainsFunc(list, func(c any) bool { return c == "ALL" }) {
		errs.add(file, pos, base+"/dropCapabilities", "%s keeps capabilities: %s dropCapabilities to hold ALL", capList(list), restricted)
	}
	if s, ok := ps["seccompProfile"].(string); ok && s == "Unconfined" {
		errs.add(file, pos, base+"/seccompProfile", "Unconfined turns seccomp off: %s seccompProfile RuntimeDefault", restricted)
	}
}

// capList shows a decoded capability list as YAML would: [A, B].
func capList(list []any) string {
	names := make([]string, 0, len(list))
	for _, c := range list {
		s, _ := c.(string)
		names = append(names, s)
	}
	return "[" + strings.Join(names, ", ") + "]"
}
