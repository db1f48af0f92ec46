package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/runner/kuberay"
)

// TestInteractiveTokenAuth: with token auth in the profile, `up` makes the
// cluster's token Secret itself, owned by the RayCluster (so it goes with
// it) and holding the token it was given (RAYSTEP_DASHBOARD_TOKEN), and
// every Ray container takes the token from it; `run --cluster`, with no
// token of its own, reads it back from that Secret and its step succeeds
// on the token head; `down` leaves neither the cluster nor the Secret, and
// the token appears in no output.
func TestInteractiveTokenAuth(t *testing.T) {
	t.Parallel()
	setup(t)
	head := tokenRay.Head(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-up-token")
	key, value := tokenLabel(t, head)
	profile := tokenProfileFile(t, map[string]string{key: value})
	env := interactiveEnv(t, "RAYSTEP_PROFILE="+profile, "RAYSTEP_DASHBOARD_TOKEN="+head.Token())
	up := mustRaystep(t, env, "up", "-n", ns, "--gpu", "a100-80gb", "--workers", "1", "--name", "tina-dev", "--owner", "tina")
	rc := rayCluster(t, ns, "tina-dev")
	secretName := kuberay.AuthSecretName("tina-dev")
	if got := rc.Spec.AuthOptions; got == nil || got.SecretName == nil || *got.SecretName != secretName {
		t.Fatalf("RayCluster authOptions %+v, want secretName %s", got, secretName)
	}
	s := &corev1.Secret{}
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: secretName}, s); err != nil {
		t.Fatalf("token Secret: %v", err)
	}
	if string(s.Data[kuberay.AuthTokenKey]) != head.Token() {
		t.Errorf("Secret %s: %s is not the token up was given", secretName, kuberay.AuthTokenKey)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "RayCluster" || s.OwnerReferences[0].UID != rc.UID {
		t.Errorf("Secret %s owners %+v, want RayCluster tina-dev (%s)", secretName, s.OwnerReferences, rc.UID)
	}
	checkPodsEnv(t, ns, "tina-dev", secretName)

	step := newDagsterStep(t, bin, ns)
	// No RAYSTEP_DASHBOARD_TOKEN: the step has only the Secret to go by.
	step.env = append(step.env, "RAYSTEP_PROFILE="+profile, "RAYSTEP_DASHBOARD_URL="+head.DashboardURL())
	step.args = append(step.args, "--cluster", "tina-dev")
	p := step.start(t)
	if code := p.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("run --cluster on the token cluster exited %d, want 0:\n%s", code, p.out.String())
	}
	messages, err := os.ReadFile(step.messages)
	if err != nil || !strings.Contains(string(messages), "which it borrows") {
		t.Errorf("run did not tell Dagster it borrows the cluster (%v):\n%s", err, messages)
	}

	down := mustRaystep(t, env, "down", "-n", ns, "tina-dev")
	awaitSecretGone(t, ns, secretName)
	nothingLeft(t, ns)
	noToken(t, ns, head.Token(), map[string]string{
		"up's output":   up.stdout + up.stderr,
		"run's output":  p.out.String(),
		"Pipes":         string(messages),
		"down's output": down.stdout + down.stderr,
	})
}
