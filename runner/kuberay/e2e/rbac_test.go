package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
)

// rbacFile is the step's least-privilege example this file proves
// (people.yaml, people's, is rbac_people_test.go's).
const rbacFile = "../../../examples/k8s/rbac.yaml"

// roleFile is an RBAC example: a Role with the RoleBinding that grants it.
type roleFile struct {
	path string
	// as is the admin config impersonating whom the RoleBinding grants
	// in ns.
	as func(ns string) *rest.Config
}

// stepRole is rbacFile, granted to the ServiceAccount raystep.
var stepRole = roleFile{path: rbacFile, as: asServiceAccount}

// who names the identity cfg impersonates.
func who(cfg *rest.Config) string {
	if g := cfg.Impersonate.Groups; len(g) > 0 {
		return cfg.Impersonate.UserName + " (groups " + strings.Join(g, ", ") + ")"
	}
	return cfg.Impersonate.UserName
}

// permission is one verb of one rule of rbacFile's Role.
type permission struct{ group, resource, verb string }

func (p permission) String() string {
	if p.group == "" {
		return p.verb + " " + p.resource
	}
	return p.verb + " " + p.resource + "." + p.group
}

// forbidden is how the API server's RBAC names p when it refuses it in ns.
func (p permission) forbidden(ns string) string {
	return fmt.Sprintf(`cannot %s resource %q in API group %q in the namespace %q`, p.verb, p.resource, p.group, ns)
}

// leastPrivilege is the table of TestLeastPrivilege: for every verb of
// every rule of the Role, what raystep does that needs it. A rule added
// to rbacFile is one entry more (TestLeastPrivilege fails until it has
// one). Where one verb is used on several paths, the entry
// takes the one a user meets first; list has two, because a step only
// lists where the API server does not stream a watch's initial state
// (WatchList: off in Kubernetes 1.33 and before 1.32), and ls and gc list
// everywhere.
var leastPrivilege = []entry{
	{permission{"ray.io", "rayjobs", "create"}, stepAction{}},
	{permission{"ray.io", "rayjobs", "get"}, stepAction{before: previousRayJob, leaves: true}}, // a restarted step re-attaches
	{permission{"ray.io", "rayjobs", "list"}, lsAction{}},
	{permission{"ray.io", "rayjobs", "list"}, stepAction{noWatchList: true}},
	{permission{"ray.io", "rayjobs", "watch"}, stepAction{}},
	{permission{"ray.io", "rayjobs", "patch"}, stepAction{}},              // spec.jobId
	{permission{"ray.io", "rayjobs", "delete"}, stepAction{leaves: true}}, // teardown's, as gc's
	{permission{"ray.io", "rayclusters", "list"}, stepAction{noWatchList: true}},
	{permission{"ray.io", "rayclusters", "watch"}, stepAction{}},
	{permission{"ray.io", "rayclusters", "create"}, runScopeAction{}},            // spec.cluster.reuse: run, the run's first step
	{permission{"ray.io", "rayclusters", "get"}, runScopeAction{attach: true}},   // a later step of the run attaches
	{permission{"ray.io", "rayclusters", "patch"}, runScopeAction{attach: true}}, // and moves the expiry
	{permission{"ray.io", "rayclusters", "delete"}, downRunAction{}},             // the run-status sensor's down --dagster-run-id
	{permission{"", "pods", "list"}, stepAction{noWatchList: true}},
	{permission{"", "pods", "watch"}, stepAction{}},
	// Before port-forward reaches kwok's pods, only the API server's
	// refusal can be seen: it authorizes the forward before it dials a
	// kubelet. With the full Role the forward goes on to the kubelet.
	{permission{"", "pods/portforward", "create"}, stepAction{portForward: true}},
	{permission{"", "events", "list"}, stepAction{noWatchList: true}},
	{permission{"", "events", "watch"}, stepAction{}},
	{permission{"", "secrets", "create"}, stepAction{change: withTokenAuth}}, // the token's Secret
	{permission{"coordination.k8s.io", "leases", "create"}, stepAction{}},
	{permission{"coordination.k8s.io", "leases", "get"}, stepAction{before: previousLease}},    // a killed attempt's heartbeat
	{permission{"coordination.k8s.io", "leases", "update"}, stepAction{before: previousLease}}, // taken over
	{permission{"coordination.k8s.io", "leases", "patch"}, stepAction{heartbeat: 50 * time.Millisecond, set: []string{endless}}},
	{permission{"coordination.k8s.io", "leases", "list"}, gcAction{}},
}

// entry is one line of a least-privilege table: a verb of a rule, and
// what raystep does that needs it.
type entry struct {
	perm permission
	run  action
}

// TestLeastPrivilege proves examples/k8s/rbac.yaml both ways, as its
// ServiceAccount (impersonated, RBAC enforced by the API server): with the
// whole Role a step, a step of spec.cluster.reuse: run (the run's first
// and a later one), `raystep down --dagster-run-id`, `raystep ls` and
// `raystep gc` succeed without a permission warning; without any one
// verb of any rule, what needs it fails at once with the API server's
// words naming that verb, resource, API group and namespace, and no
// other.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	proveLeastPrivilege(t, stepRole, leastPrivilege, []action{stepAction{}, stepAction{noWatchList: true}, stepAction{portForward: true},
		stepAction{change: withTokenAuth}, runScopeAction{}, runScopeAction{attach: true}, downRunAction{}, lsAction{}, gcAction{}})
}

// proveLeastPrivilege checks that table has an entry for every verb of
// every rule of f's Role and no other, that each action of full succeeds
// under the whole Role without a permission warning, and that each entry's
// action fails without its verb, with the API server's words for it
// alone.
func proveLeastPrivilege(t *testing.T, f roleFile, table []entry, full []action) {
	t.Helper()
	perms := rolePermissions(t, f.path)
	var covered []permission
	for _, c := range table {
		if !slices.Contains(perms, c.perm) {
			t.Errorf("the table tests %s, which %s does not grant", c.perm, f.path)
		}
		covered = append(covered, c.perm)
	}
	for _, p := range perms {
		if !slices.Contains(covered, p) {
			t.Errorf("%s grants %s, but the table has nothing that needs it", f.path, p)
		}
	}
	if t.Failed() {
		return
	}
	setup(t)
	start := time.Now()
	t.Cleanup(func() { t.Logf("%s: %s", t.Name(), time.Since(start).Round(time.Millisecond)) })
	prefix := strings.TrimSuffix(filepath.Base(f.path), ".yaml")
	for i, a := range full {
		t.Run(fmt.Sprintf("full Role/%s", a), func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, fmt.Sprintf("e2e-lp-%s-full-%d", prefix, i))
			applyRBAC(t, f, ns, func(rules []any) []any { return rules })
			var mu sync.Mutex
			var warnings []string
			err := a.do(t, ns, func(level, msg string) {
				if level == "WARNING" && (strings.Contains(msg, "forbidden") || strings.Contains(msg, "Lease")) {
					mu.Lock()
					defer mu.Unlock()
					warnings = append(warnings, msg)
				}
			})
			if err != nil {
				t.Fatalf("%s as %s in %s: %v", a, who(f.as(ns)), ns, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(warnings) > 0 {
				t.Errorf("%s as %s in %s lacks a permission: %q", a, who(f.as(ns)), ns, warnings)
			}
		})
	}
	for i, c := range table {
		t.Run(fmt.Sprintf("without %s/%s", c.perm, c.run), func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, fmt.Sprintf("e2e-lp-%s-%d", prefix, i))
			applyRBAC(t, f, ns, without(c.perm))
			err := c.run.do(t, ns, nil)
			if err == nil {
				t.Fatalf("%s without %s succeeded", c.run, c.perm)
			}
			var exit *exitError
			switch _, step := c.run.(stepAction); {
			case step && !errors.Is(err, runner.ErrInfrastructure):
				t.Errorf("step error is not an infrastructure failure (exit 3): %v", err)
			case errors.As(err, &exit) && exit.code != 3:
				t.Errorf("raystep exited %d, want 3 (an infrastructure failure): %v", exit.code, err)
			}
			t.Logf("%s without %s: %v", c.run, c.perm, err)
			want := c.perm.forbidden(ns)
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s without %s: error = %v\nwant it to say %q", c.run, c.perm, err, want)
			}
			if other := otherRefusals(err.Error(), want); len(other) > 0 {
				t.Errorf("%s without %s was refused more: %q", c.run, c.perm, other)
			}
		})
	}
}

// refusal matches RBAC's words for one refused verb.
var refusal = regexp.MustCompile(`cannot \w+ resource "[^"]*" in API group "[^"]*" in the namespace "[^"]*"`)

// otherRefusals returns the refusals in msg other than want.
func otherRefusals(msg, want string) []string {
	var other []string
	for _, m := range refusal.FindAllString(msg, -1) {
		if m != want {
			other = append(other, m)
		}
	}
	return other
}

// endless is a job that only ends when the step fails, so the job cannot
// finish before the failure under test shows.
const endless = `spec.entrypoint=python -c "import time; time.sleep(3600)"`

// action is something raystep does as ns/raystep; notify, if set, also
// gets a step's notices.
type action interface {
	do(t *testing.T, ns string, notify kuberay.Notify) error
	String() string
}

// stepAction runs a whole step in-process through the Runner.
type stepAction struct {
	// noWatchList makes the clients list, then watch, as against an API
	// server without WatchList.
	noWatchList bool
	// portForward reaches the dashboard by port-forward (no URL).
	portForward bool
	// heartbeat is the Lease renewal interval; zero is the default.
	heartbeat time.Duration
	// set overrides fields of testdata/step.yaml (path=value).
	set []string
	// change, if set, changes the backend before the step runs: a profile
	// that turns a feature on (token auth, a Kueue queue) is its copy of
	// b.Profile.
	change func(b *kuberay.Backend)
	// before makes, as the admin, what a previous attempt of the step left
	// (its RayJob, or its Lease) just before the step creates its RayJob.
	before func(t *testing.T, job *rayv1.RayJob)
	// leaves says that the step cannot delete what it created: the test
	// does, as the admin.
	leaves bool
}

func (a stepAction) String() string {
	var with []string
	for _, f := range []struct {
		on   bool
		name string
	}{{a.noWatchList, "no watch-list"}, {a.portForward, "port-forward"}, {a.heartbeat > 0, "fast heartbeat"}} {
		if f.on {
			with = append(with, f.name)
		}
	}
	if a.change != nil {
		with = append(with, "a changed profile")
	}
	s := "step"
	if len(with) > 0 {
		s += " with " + strings.Join(with, ", ")
	}
	if a.before != nil {
		s += " after a killed attempt"
	}
	return s
}

func (a stepAction) do(t *testing.T, ns string, notify kuberay.Notify) error {
	t.Cleanup(func() { clearNamespace(t, ns) })
	b := backend(t, spec(t, a.set...), ns, asServiceAccount(ns), nil)
	if a.noWatchList {
		b.Kube, b.Ray = kubeNoWatchList{b.Kube}, rayNoWatchList{b.Ray}
	}
	if a.portForward {
		b.Dashboard.URL = ""
	}
	b.HeartbeatInterval = a.heartbeat
	b.Customize = func(job *rayv1.RayJob) {
		fastPods(job)
		if a.before != nil {
			a.before(t, job)
		}
	}
	if a.change != nil {
		a.change(b)
	}
	if notify != nil {
		logged := b.Notify
		b.Notify = func(level, msg string) { logged(level, msg); notify(level, msg) }
	}
	_, err := newRunner(t, b).Run(t.Context(), step(b.Spec, runID(t)))
	switch {
	case err == nil:
		nothingLeft(t, ns)
	case !a.leaves:
		tornDown(t, ns)
	}
	return err
}

// lsAction lists the namespace's raystep RayJobs, as `raystep ls` does.
type lsAction struct{}

func (lsAction) String() string { return "ls" }

func (lsAction) do(t *testing.T, ns string, _ kuberay.Notify) error {
	c := clients(t, ns)
	_, err := kuberay.ListRayJobs(t.Context(), c.Ray, ns)
	return err
}

// gcAction collects the namespace's abandoned RayJobs, as `raystep gc`
// does.
type gcAction struct{}

func (gcAction) String() string { return "gc" }

func (gcAction) do(t *testing.T, ns string, _ kuberay.Notify) error {
	c := clients(t, ns)
	jobs, err := kuberay.ListRayJobs(t.Context(), c.Ray, ns)
	if err != nil {
		return err
	}
	leases, err := kuberay.ListLeases(t.Context(), c.Kube, ns)
	if err != nil {
		return err
	}
	verdicts := kuberay.JudgeAll(jobs, leases, time.Now(), kuberay.JudgeOptions{})
	return kuberay.Collect(t.Context(), c.Kube, c.Ray, verdicts, false, func(kuberay.Result) {})
}

// clients are ns/raystep's clients.
func clients(t *testing.T, ns string) *kuberay.Clients {
	t.Helper()
	c, err := kuberay.NewClients(asServiceAccount(ns), kuberay.ConnectOptions{UserAgent: "raystep-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// previousRayJob creates job, suspended so that KubeRay leaves it alone,
// as a previous attempt of the step would have.
func previousRayJob(t *testing.T, job *rayv1.RayJob) {
	prev := job.DeepCopy()
	prev.Spec.Suspend = true
	if err := shared.k8s.Client.Create(context.WithoutCancel(t.Context()), prev); err != nil {
		t.Errorf("create the previous attempt's RayJob: %v", err)
	}
}

// previousLease creates the heartbeat Lease of a killed attempt of the
// step whose RayJob is job (the RayJob itself is gone).
func previousLease(t *testing.T, job *rayv1.RayJob) {
	holder, renewed := "killed-host/1", metav1.NewMicroTime(time.Now().Add(-time.Hour))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, Labels: map[string]string{kuberay.LabelManagedBy: kuberay.ManagedByRaystep}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed},
	}
	if err := shared.k8s.Client.Create(context.WithoutCancel(t.Context()), lease); err != nil {
		t.Errorf("create the killed attempt's Lease: %v", err)
	}
}

// fastPods makes kwok take the RayJob's pods through their stages without
// kwok's realistic delays. kwok deletes a pod at a random time before its
// deletionTimestamp: a grace period of one second keeps that short.
func fastPods(job *rayv1.RayJob) {
	cs := job.Spec.RayClusterSpec
	templates := []*corev1.PodTemplateSpec{&cs.HeadGroupSpec.Template}
	for i := range cs.WorkerGroupSpecs {
		templates = append(templates, &cs.WorkerGroupSpecs[i].Template)
	}
	grace := int64(1)
	for _, tpl := range templates {
		tpl.Spec.TerminationGracePeriodSeconds = &grace
		if tpl.Annotations == nil {
			tpl.Annotations = map[string]string{}
		}
		for _, stage := range []string{"pod-create", "pod-init-container-running", "pod-init-container-completed", "pod-ready", "pod-delete"} {
			tpl.Annotations[stage+".stage.kwok.x-k8s.io/delay"] = "0s"
			tpl.Annotations[stage+".stage.kwok.x-k8s.io/jitter-delay"] = "0s"
		}
	}
}

// tornDown fails the test unless every RayJob the step left in ns is
// being deleted: teardown issued the delete, even where it could not
// watch it finish.
func tornDown(t *testing.T, ns string) {
	t.Helper()
	jobs := &rayv1.RayJobList{}
	if err := shared.k8s.Client.List(context.WithoutCancel(t.Context()), jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			t.Errorf("the step left RayJob %s/%s undeleted", ns, j.Name)
		}
	}
}

// clearNamespace deletes, as the admin, the RayJobs, RayClusters and
// heartbeat Leases a test left in ns and waits until they, their RayClusters and pods are
// gone.
func clearNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fg := client.PropagationPolicy(metav1.DeletePropagationForeground)
	for _, obj := range []client.Object{&rayv1.RayJob{}, &rayv1.RayCluster{}, &coordinationv1.Lease{}} {
		if err := shared.k8s.Client.DeleteAllOf(ctx, obj, client.InNamespace(ns), fg); err != nil {
			t.Errorf("delete the %T left in %s: %v", obj, ns, err)
		}
	}
	for {
		left := leftovers(ctx, ns)
		leases := &coordinationv1.LeaseList{}
		if err := shared.k8s.Client.List(ctx, leases, client.InNamespace(ns)); err != nil {
			left += "; " + err.Error()
		}
		for _, l := range leases.Items {
			left += ", Lease " + l.Name
		}
		left = strings.TrimPrefix(left, ", ")
		if left == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("left behind in %s: %s", ns, left)
			return
		case <-time.After(200 * time.Millisecond): // the admin polls: nothing to watch across kinds
		}
	}
}

// kubeNoWatchList is a Kubernetes clientset whose informers list, then
// watch, as against an API server without WatchList.
type kubeNoWatchList struct{ kubeapi.Interface }

// IsWatchListSemanticsUnSupported tells client-go not to stream lists.
func (kubeNoWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// rayNoWatchList is kubeNoWatchList's KubeRay clientset.
type rayNoWatchList struct{ kubeapi.RayInterface }

// IsWatchListSemanticsUnSupported tells client-go not to stream lists.
func (rayNoWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// rbacObjects reads the objects of the RBAC example file.
func rbacObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// rolePermissions lists every verb of every rule of file's Role.
func rolePermissions(t *testing.T, file string) []permission {
	t.Helper()
	var perms []permission
	for _, obj := range rbacObjects(t, file) {
		if obj.GetKind() != "Role" {
			continue
		}
		rules, _, err := unstructured.NestedSlice(obj.Object, "rules")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			rule := r.(map[string]any)
			for _, g := range stringsOf(rule["apiGroups"]) {
				for _, res := range stringsOf(rule["resources"]) {
					for _, v := range stringsOf(rule["verbs"]) {
						perms = append(perms, permission{g, res, v})
					}
				}
			}
		}
	}
	return perms
}

func stringsOf(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// without returns a Role edit that drops p: its verb from its rule, and the
// rule when no verb is left.
func without(p permission) func(rules []any) []any {
	return func(rules []any) []any {
		var out []any
		for _, r := range rules {
			rule := r.(map[string]any)
			if slices.Equal(stringsOf(rule["apiGroups"]), []string{p.group}) && slices.Equal(stringsOf(rule["resources"]), []string{p.resource}) {
				var verbs []any
				for _, v := range stringsOf(rule["verbs"]) {
					if v != p.verb {
						verbs = append(verbs, v)
					}
				}
				if len(verbs) == 0 {
					continue
				}
				rule["verbs"] = verbs
			}
			out = append(out, rule)
		}
		return out
	}
}

// applyRBAC creates f's objects in ns instead of ml-ads, with the
// Role's rules changed by edit, and deletes them after the test. A
// CronJob in f (gc.yaml's) is only checked: the API server dry-runs its
// create, since the test runs gc itself.
func applyRBAC(t *testing.T, f roleFile, ns string, edit func(rules []any) []any) {
	t.Helper()
	var granted permission
	for _, obj := range rbacObjects(t, f.path) {
		obj.SetNamespace(ns)
		if obj.GetKind() == "CronJob" {
			if err := shared.k8s.Client.Create(t.Context(), obj, client.DryRunAll); err != nil {
				t.Fatalf("%s: the API server refuses its CronJob: %v", f.path, err)
			}
			continue
		}
		if subjects, ok := obj.Object["subjects"].([]any); ok {
			for _, s := range subjects {
				if sub := s.(map[string]any); sub["kind"] == "ServiceAccount" {
					sub["namespace"] = ns
				}
			}
		}
		if rules, ok := obj.Object["rules"].([]any); ok {
			obj.Object["rules"] = edit(rules)
			granted = firstPermission(obj.Object["rules"].([]any))
		}
		if err := shared.k8s.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() {
			if err := client.IgnoreNotFound(shared.k8s.Client.Delete(context.Background(), obj)); err != nil {
				t.Errorf("delete %s %s/%s: %v", obj.GetKind(), ns, obj.GetName(), err)
			}
		})
	}
	cfg := f.as(ns)
	awaitAllowed(t, cfg, who(cfg), ns, granted)
}

// firstPermission is the first verb of the first rule.
func firstPermission(rules []any) permission {
	rule := rules[0].(map[string]any)
	return permission{stringsOf(rule["apiGroups"])[0], stringsOf(rule["resources"])[0], stringsOf(rule["verbs"])[0]}
}

// awaitAllowed waits until the API server lets who, as cfg authenticates
// them, do p in ns: the authorizer learns of Roles and RoleBindings by
// watch, and from then on the Role just created is in force.
func awaitAllowed(t *testing.T, cfg *rest.Config, who, ns string, p permission) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resource, sub, _ := strings.Cut(p.resource, "/")
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: p.verb, Group: p.group, Resource: resource, Subresource: sub}}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		got, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err == nil && got.Status.Allowed {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s is still not allowed to %s in %s after 30s: %v", who, p, ns, err)
		case <-time.After(20 * time.Millisecond): // the authorizer's cache has no event to wait on from here
		}
	}
}

// asServiceAccount is the admin config impersonating ns/raystep.
func asServiceAccount(ns string) *rest.Config { return asAccount(ns, "raystep") }

// asAccount is the admin config impersonating the ServiceAccount ns/name.
func asAccount(ns, name string) *rest.Config {
	cfg := rest.CopyConfig(shared.k8s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	return cfg
}

// withTokenAuth turns Ray's token authentication on in the step's profile:
// the step then creates its token's Secret. (The shared head runs without
// auth and takes any token.)
func withTokenAuth(b *kuberay.Backend) { b.Profile = tokenProfile(b.Profile) }
