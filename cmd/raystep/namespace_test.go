package main

import (
	"strings"
	"testing"
)

// TestNamespaceIsAName: a namespace that Kubernetes would refuse, from
// --namespace (in every command that takes one) or RAYSTEP_NAMESPACE, is a
// usage error (exit 2) that names where it came from and what a name
// looks like, before anything is read or created; an empty one is no
// namespace.
func TestNamespaceIsAName(t *testing.T) {
	t.Parallel()
	const rule = "want a Kubernetes namespace name: at most 63 lowercase letters, digits and '-'"
	long := strings.Repeat("a", 64)
	for _, args := range [][]string{
		{"run", "-f", eval, "--namespace", "Team_B"},
		{"render", "-f", eval, "--namespace", "team-b-"},
		{"up", "--name", "dev", "--namespace", long},
		{"down", "dev", "-n", "Team_B"},
		{"ls", "-n", "a b"},
		{"gc", "--dry-run", "-n", "-team"},
		{"dashboard", "dev", "-n", "Team_B"},
		{"notebook", "dev", "-n", "Team_B"},
		{"ui", "-n", "team.b"},
	} {
		code, out, errOut := runTest(t, nil, args...)
		bad := args[len(args)-1]
		if code != exitUsage || out != "" || !strings.Contains(errOut, `invalid argument "`+bad+`" for "`) || !strings.Contains(errOut, rule) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and what a namespace name is", args, code, out, errOut)
		}
	}
	code, _, errOut := runTest(t, map[string]string{"RAYSTEP_NAMESPACE": "Team_B"}, "render", "-f", eval)
	if code != exitUsage || !strings.Contains(errOut, "RAYSTEP_NAMESPACE=Team_B: "+rule) {
		t.Errorf("RAYSTEP_NAMESPACE=Team_B: exit %d, %q; want 2 and the variable named", code, errOut)
	}
	code, out, errOut := runTest(t, map[string]string{"RAYSTEP_NAMESPACE": "team-b"}, "render", "-f", eval, "--namespace", "")
	if code != 0 || !strings.Contains(out, "namespace: team-b\n") {
		t.Errorf("--namespace '' is no namespace: exit %d, want 0 and RAYSTEP_NAMESPACE's:\n%s%s", code, out, errOut)
	}
}
