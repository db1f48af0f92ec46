package e2e

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

// violates is how the API server's Pod Security admission starts a refusal
// in a namespace that enforces the restricted standard at latest.
const violates = `violates PodSecurity "restricted:latest"`

// TestPodSecurityAdmitted: the pods KubeRay makes from raystep's RayJob
// (the head with its autoscaler sidecar, a worker with the wait-gcs-ready
// init container KubeRay injects) are admitted by the API server in a
// namespace that enforces the restricted standard, and every container
// carries the profile's restricted security context. The same pod specs,
// weakened one way at a time, are refused by the API server there: Pod
// Security is really enforced.
func TestPodSecurityAdmitted(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-psa-admitted")
	serviceAccount(t, ns, shared.profile.Spec.ServiceAccount) // the autoscaler's
	s := spec(t, "spec.cluster.workers.0.minReplicas=0", "spec.cluster.workers.0.maxReplicas=2")
	pods := readyPods(t, backend(t, s, ns, nil, nil), s)
	got := &corev1.Namespace{}
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Name: ns}, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(restricted(), got.Labels, ignoreKey("kubernetes.io/metadata.name")); diff != "" {
		t.Fatalf("namespace %s labels (-want +got):\n%s", ns, diff)
	}
	want := map[string][]string{
		"head":   {"ray-head", "autoscaler"},
		"worker": {"wait-gcs-ready", "ray-worker"},
	}
	for kind, names := range want {
		p := pods[kind]
		if p == nil {
			t.Fatalf("no %s pod was admitted; pods by node type: %v", kind, slices.Sorted(maps.Keys(pods)))
		}
		if diff := cmp.Diff(names, containerNames(p)); diff != "" {
			t.Errorf("%s pod %s containers, init first (-want +got):\n%s", kind, p.Name, diff)
		}
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			if msg := notRestricted(p, c); msg != "" {
				t.Errorf("%s pod %s container %s: %s", kind, p.Name, c.Name, msg)
			}
		}
		t.Run(kind, func(t *testing.T) { refusedWhenWeakened(t, ns, p) })
	}
}

// readyPods provisions s in b's namespace, waits until the cluster is
// ready and returns its pods by node type ("head", "worker") as the API
// server admitted them. The cluster is torn down when the test ends.
func readyPods(t *testing.T, b *kuberay.Backend, s *schemas.Spec) map[string]*corev1.Pod {
	t.Helper()
	ns := s.Metadata.Namespace
	cl, err := b.Provision(t.Context(), runner.Resolve(step(s, runID(t)), nil), runner.Discard)
	t.Cleanup(func() {
		if cl == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cl.Teardown(ctx, false); err != nil {
			t.Errorf("teardown: %v", err)
		}
		if left := leftovers(ctx, ns); left != "" {
			t.Errorf("left behind in %s: %s", ns, left)
		}
	})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	if err := cl.Ready(t.Context()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	list := &corev1.PodList{}
	if err := shared.k8s.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		pods[p.Labels["ray.io/node-type"]] = p
	}
	return pods
}

// containerNames lists p's init containers, then its containers.
func containerNames(p *corev1.Pod) []string {
	var names []string
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		names = append(names, c.Name)
	}
	return names
}

// notRestricted says what the restricted standard would refuse in c, a
// container of p, as set by the security contexts raystep wrote, or "".
func notRestricted(p *corev1.Pod, c corev1.Container) string {
	sc, psc := c.SecurityContext, p.Spec.SecurityContext
	var bad []string
	if sc == nil {
		return "no security context"
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad = append(bad, "allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		bad = append(bad, "privileged")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		bad = append(bad, "capabilities do not drop ALL and add nothing")
	}
	if !orPod(sc.RunAsNonRoot, psc.RunAsNonRoot) {
		bad = append(bad, "runAsNonRoot is not true")
	}
	if u := sc.RunAsUser; (u != nil && *u == 0) || (u == nil && psc.RunAsUser != nil && *psc.RunAsUser == 0) {
		bad = append(bad, "runs as user 0")
	}
	seccomp := psc.SeccompProfile
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad = append(bad, "seccomp profile is not RuntimeDefault")
	}
	return strings.Join(bad, ", ")
}

// orPod reports whether the container's flag, or else the pod's, is true.
func orPod(ctr, pod *bool) bool {
	if ctr != nil {
		return *ctr
	}
	return pod != nil && *pod
}

// weakening is one way a pod spec can break the restricted standard,
// with the words the API server's refusal names it by.
type weakening struct {
	name   string
	weaken func(*corev1.PodSpec)
	reason string
}

// weakenings returns every weakening the tests try.
func weakenings() []weakening {
	return []weakening{
		{"privileged", func(s *corev1.PodSpec) {
			eachContainer(s, func(c *corev1.Container) {
				c.SecurityContext.Privileged = ptr(true)
				c.SecurityContext.AllowPrivilegeEscalation = nil // privileged escalates: false would be invalid
			})
		}, "privileged ("},
		{"hostPath volume", func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, `restricted volume types (volume "host" uses restricted volume type "hostPath")`},
		{"allowPrivilegeEscalation", func(s *corev1.PodSpec) {
			eachContainer(s, func(c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = ptr(true) })
		}, "allowPrivilegeEscalation != false"},
		{"root", func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsUser = ptr(int64(0))
		}, "runAsUser=0"},
		{"runAsNonRoot false", func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot = ptr(false)
			eachContainer(s, func(c *corev1.Container) { c.SecurityContext.RunAsNonRoot = nil })
		}, "runAsNonRoot != true"},
		{"capability added", func(s *corev1.PodSpec) {
			eachContainer(s, func(c *corev1.Container) { c.SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"} })
		}, "unrestricted capabilities"},
		{"capabilities kept", func(s *corev1.PodSpec) {
			eachContainer(s, func(c *corev1.Container) { c.SecurityContext.Capabilities = nil })
		}, "unrestricted capabilities"},
		{"seccomp Unconfined", func(s *corev1.PodSpec) {
			s.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
			eachContainer(s, func(c *corev1.Container) { c.SecurityContext.SeccompProfile = nil })
		}, "seccompProfile"},
		{"host network", func(s *corev1.PodSpec) { s.HostNetwork = true }, "host namespaces"},
	}
}

// refusedWhenWeakened creates admitted's spec again as a new pod in ns
// (a server-side dry run: admission runs, nothing is stored): as it is, the
// API server admits it; weakened, it refuses it for Pod Security.
func refusedWhenWeakened(t *testing.T, ns string, admitted *corev1.Pod) {
	if err := dryRunPod(t, ns, admitted.Spec); err != nil {
		t.Fatalf("the admitted pod %s created again: %v", admitted.Name, err)
	}
	for _, w := range weakenings() {
		spec := admitted.Spec.DeepCopy()
		w.weaken(spec)
		err := dryRunPod(t, ns, *spec)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), violates) || !strings.Contains(err.Error(), w.reason) {
			t.Errorf("%s: create = %v, want Forbidden: %s: %s...", w.name, err, violates, w.reason)
		}
	}
}

// dryRunPod asks the API server to create a pod of spec in ns without
// storing it.
func dryRunPod(t *testing.T, ns string, spec corev1.PodSpec) error {
	spec.NodeName = ""
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-probe-", Namespace: ns}, Spec: spec}
	_, err := shared.k8s.Clientset.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func eachContainer(s *corev1.PodSpec, f func(*corev1.Container)) {
	for i := range s.InitContainers {
		f(&s.InitContainers[i])
	}
	for i := range s.Containers {
		f(&s.Containers[i])
	}
}

// TestPodSecurityRefusal: a RayJob whose pods the API server refuses for
// Pod Security (here made so with Backend.Customize, which the profile's
// validation cannot see) fails the step at once as an infrastructure
// failure (exit 3) carrying the API server's reason from KubeRay's
// FailedToCreate event, and the step leaves nothing behind.
func TestPodSecurityRefusal(t *testing.T) {
	t.Parallel()
	setup(t)
	tests := []struct {
		name, ns  string
		customize func(*rayv1.RayJob)
		reasons   []string // KubeRay records the refusal under either
		message   []string
	}{
		{name: "head privileged with a hostPath", ns: "e2e-psa-head", reasons: []string{"FailedToCreateHeadPod", "FailedCreateHeadPod"},
			customize: func(j *rayv1.RayJob) {
				weaken(&j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec, "privileged", "hostPath volume")
			},
			message: []string{violates, `privileged (container "ray-head" must not set securityContext.privileged=true)`, `restricted volume types (volume "host" uses restricted volume type "hostPath")`}},
		{name: "worker allowPrivilegeEscalation", ns: "e2e-psa-worker", reasons: []string{"FailedToCreateWorkerPod", "FailedCreateWorkerPod"},
			customize: func(j *rayv1.RayJob) {
				weaken(&j.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec, "allowPrivilegeEscalation")
			},
			message: []string{violates, `allowPrivilegeEscalation != false (containers "wait-gcs-ready", "ray-worker" must set securityContext.allowPrivilegeEscalation=false)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, tt.ns)
			b := backend(t, spec(t), ns, nil, nil)
			b.Customize = tt.customize
			res, err := newRunner(t, b).Run(t.Context(), step(b.Spec, runID(t)))
			var ce *kuberay.ClusterError
			if !errors.Is(err, runner.ErrInfrastructure) || !errors.As(err, &ce) {
				t.Fatalf("step error = %v, want an infrastructure failure (exit 3) from the cluster", err)
			}
			if !slices.Contains(tt.reasons, ce.Reason) {
				t.Errorf("reason %q, want one of %q", ce.Reason, tt.reasons)
			}
			for _, m := range tt.message {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("step error %q does not say %q", err, m)
				}
			}
			took := res.Durations[runner.PhaseProvision]
			if took > time.Minute {
				t.Errorf("failed after %s, want well before the 3m provision timeout", took)
			}
			t.Logf("FIGURES %s: refused after %s (teardown %s): %v", tt.name, took.Round(time.Millisecond),
				res.Durations[runner.PhaseTeardown].Round(time.Millisecond), err)
			nothingLeft(t, ns)
		})
	}
}

// weaken applies the named weakenings to s.
func weaken(s *corev1.PodSpec, names ...string) {
	for _, w := range weakenings() {
		if slices.Contains(names, w.name) {
			w.weaken(s)
		}
	}
}

// serviceAccount creates service account name in ns and deletes it when
// the test ends.
func serviceAccount(t *testing.T, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := shared.k8s.Client.Create(t.Context(), sa); err != nil {
		t.Fatalf("create service account: %v", err)
	}
	t.Cleanup(func() { _ = shared.k8s.Client.Delete(context.Background(), sa) })
}

// ignoreKey leaves key out of a map comparison.
func ignoreKey(key string) cmp.Option {
	return cmpopts.IgnoreMapEntries(func(k, _ string) bool { return k == key })
}
