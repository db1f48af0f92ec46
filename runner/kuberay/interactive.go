package kuberay

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
	"github.com/raystep/raystep/schemas"
)

// Interactive clusters (`raystep up`, `down`, `ls`, `gc`): a long-lived
// RayCluster, not a RayJob, built from a spec and the profile by the same
// code as a step's cluster (clusterSpec), labelled raystep.dev/kind=
// interactive with its owner, and carrying its expiry in an annotation.
// Nothing deletes it but `raystep down` and, once it expired, `raystep gc`.
const (
	// KindInteractive is the raystep.dev/kind label of interactive clusters.
	KindInteractive = fleet.KindInteractive
	// AnnotationExpires is when an interactive cluster expires, in RFC 3339.
	AnnotationExpires = "raystep.dev/expires-at"
)

// ErrNotInteractive is wrapped by the errors about a name that is not a
// raystep interactive cluster: none of that name, or a RayCluster that
// raystep did not make for people. Nothing was created or deleted.
var ErrNotInteractive = fleet.NotFound("not a raystep interactive cluster")

// BuildCluster returns the interactive RayCluster of spec under profile:
// named spec.Metadata.Name in namespace, owned by spec.Metadata.Owner and
// expiring at expires. Its pods are a step's pods (clusterSpec); with
// Ray's token authentication it reads its token from the Secret
// AuthSecretName(name), which Up creates.
func BuildCluster(spec *schemas.Spec, profile *schemas.Profile, namespace string, expires time.Time) (*rayv1.RayCluster, error) {
	return buildCluster(spec, profile, namespace, expires, map[string]string{LabelKind: KindInteractive})
}

// buildCluster is BuildCluster with own, raystep's labels that win over
// the rest (raystep.dev/kind among them), on the RayCluster and its pods.
func buildCluster(spec *schemas.Spec, profile *schemas.Profile, namespace string, expires time.Time, own map[string]string) (*rayv1.RayCluster, error) {
	if spec == nil || profile == nil {
		return nil, fmt.Errorf("build RayCluster: spec and profile are required")
	}
	name := spec.Metadata.Name
	podLabels := podLabels(spec)
	maps.Copy(podLabels, own)
	cs, err := clusterSpec(spec, profile, podLabels, AuthSecretName(name))
	if err != nil {
		return nil, fmt.Errorf("build RayCluster %s: %w", name, err)
	}
	labels := map[string]string{}
	maps.Copy(labels, profile.Spec.Labels)
	maps.Copy(labels, spec.Metadata.Labels)
	maps.Copy(labels, podLabels)
	annotations := maps.Clone(spec.Metadata.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if g := gpuSummary(spec); g != "" {
		annotations[AnnotationGPUs] = g
	}
	annotations[AnnotationExpires] = expires.UTC().Format(time.RFC3339)
	return &rayv1.RayCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations},
		Spec:       *cs,
	}, nil
}

// Interactive makes, extends, waits for and deletes interactive clusters.
type Interactive struct {
	// Kube and Ray are the clients; see Connect.
	Kube kubeapi.Interface
	Ray  kubeapi.RayInterface
	// Token is the platform's fixed Ray token (RAYSTEP_DASHBOARD_TOKEN)
	// for a token-authenticated cluster; empty makes a fresh one.
	Token string
	// UnschedulableGrace is how long a pod may stay Unschedulable before
	// up fails; zero fails at once.
	UnschedulableGrace time.Duration
	// Notify receives what the watches report (state changes, warnings).
	Notify Notify
	// Clock is the source of time; nil means runner.SystemClock.
	Clock runner.Clock
	// KeepDir is where this machine keeps a copy of the tokens up makes
	// (see interactive_keep.go); empty keeps none.
	KeepDir string
}

// Upped is what Up did.
type Upped struct {
	// Cluster is the RayCluster as created, or as found and extended.
	Cluster *rayv1.RayCluster
	// Created is true when Up created the cluster (and the caller must
	// delete it if it never becomes ready), false when it extended a live one.
	Created bool
	// Previous is the expiry an extended cluster had before.
	Previous string
	// Secret names the token Secret of a token-authenticated cluster.
	Secret string
	// Restored is true when Up brought back GPU workers idle release
	// had given back.
	Restored bool
}

// Up creates rc, or, when a raystep interactive cluster of that name
// lives already (the API server's name uniqueness decides), moves its
// expiry to rc's and leaves the rest of it alone. A RayCluster of that
// name that is not raystep's interactive one is refused with
// ErrNotInteractive. With token authentication it creates the token
// Secret, owned by the new RayCluster. When Created is true the caller
// owns what Up made, also when Up fails.
func (i *Interactive) Up(ctx context.Context, rc *rayv1.RayCluster) (Upped, error) {
	clusters := i.Ray.RayV1().RayClusters(rc.Namespace)
	got, err := clusters.Create(ctx, rc, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case apierrors.IsAlreadyExists(err):
		return i.extend(ctx, rc)
	case err != nil && certainlyNotCreated(err):
		return Upped{}, fmt.Errorf("create RayCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	case err != nil:
		return Upped{Cluster: rc, Created: true}, fmt.Errorf("create RayCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	}
	up := Upped{Cluster: got, Created: true}
	secret := authSecret(&got.Spec, &got.ObjectMeta, "RayCluster")
	if secret == nil {
		return up, nil
	}
	token := i.Token
	if token == "" {
		if token, err = NewAuthToken(); err != nil {
			return up, err
		}
	}
	secret.Data = map[string][]byte{AuthTokenKey: []byte(token)}
	if _, err := i.Kube.CoreV1().Secrets(got.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
		return up, fmt.Errorf("create token Secret %s/%s for RayCluster %s: %w", got.Namespace, secret.Name, got.Name, err)
	}
	if err := i.keep(got, KeptRayToken, []byte(token)); err != nil && i.Notify != nil {
		i.Notify("WARNING", err.Error()+": only who may get Secrets here will reach the cluster")
	}
	up.Secret = secret.Name
	return up, nil
}

// extend moves the expiry of the live interactive cluster named like rc
// to rc's.
func (i *Interactive) extend(ctx context.Context, rc *rayv1.RayCluster) (Upped, error) {
	got, err := i.Find(ctx, rc.Namespace, rc.Name)
	if err != nil {
		return Upped{}, err
	}
	if got.DeletionTimestamp != nil {
		return Upped{}, fmt.Errorf("RayCluster %s/%s is being deleted (since %s): run up again once it is gone",
			got.Namespace, got.Name, got.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	expires := rc.Annotations[AnnotationExpires]
	// The uid makes the patch fail on another RayCluster of the same name
	// (it is immutable); KubeRay's status updates do not conflict with it.
	// The idle settings are up's again, and up counts as use.
	annotations := map[string]any{AnnotationExpires: expires, AnnotationIdleSince: nil}
	for _, k := range []string{AnnotationIdle, AnnotationIdleStop, AnnotationActiveAt} {
		if v, ok := rc.Annotations[k]; ok {
			annotations[k] = v
		} else {
			annotations[k] = nil
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": got.UID, "annotations": annotations}})
	if err != nil {
		return Upped{}, err
	}
	patched, err := i.Ray.RayV1().RayClusters(got.Namespace).Patch(ctx, got.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return Upped{}, fmt.Errorf("extend RayCluster %s/%s to %s: %w", got.Namespace, got.Name, expires, err)
	}
	restored := false
	if Released(patched) {
		if patched, restored, err = i.Restore(ctx, patched, i.clock().Now()); err != nil {
			return Upped{}, err
		}
	}
	up := Upped{Cluster: patched, Previous: got.Annotations[AnnotationExpires], Restored: restored}
	if s := authSecret(&patched.Spec, &patched.ObjectMeta, "RayCluster"); s != nil {
		up.Secret = s.Name
	}
	return up, nil
}

// Find returns the interactive cluster ns/name, or an error wrapping
// ErrNotInteractive when there is none of that name or the RayCluster of
// that name is not raystep's interactive one.
func (i *Interactive) Find(ctx context.Context, ns, name string) (*rayv1.RayCluster, error) {
	rc, err := i.Ray.RayV1().RayClusters(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s/%s: %w: there is no RayCluster of that name (raystep ls lists them)", ns, name, ErrNotInteractive)
	}
	if err != nil {
		return nil, fmt.Errorf("get RayCluster %s/%s: %w", ns, name, err)
	}
	switch {
	case IsInteractive(rc):
		return rc, nil
	case rc.Labels[LabelManagedBy] == ManagedByRaystep:
		return nil, fmt.Errorf("RayCluster %s/%s: %w: it is a step's cluster (%s=%s), which the step deletes itself",
			ns, name, ErrNotInteractive, LabelKind, rc.Labels[LabelKind])
	}
	return nil, fmt.Errorf("RayCluster %s/%s: %w: raystep did not make it (no label %s=%s), so it leaves it alone",
		ns, name, ErrNotInteractive, LabelManagedBy, ManagedByRaystep)
}

// IsInteractive reports whether rc is a raystep interactive cluster: one
// of `raystep up` or a run-scoped one (KindRun), which outlive a step.
func IsInteractive(rc *rayv1.RayCluster) bool {
	k := rc.Labels[LabelKind]
	return rc.Labels[LabelManagedBy] == ManagedByRaystep && (k == KindInteractive || k == KindRun)
}

// AwaitReady waits by watch until KubeRay says every pod of rc runs, and
// returns the RayCluster as then. It fails fast, as a step's cluster
// does, on pods that are Unschedulable (after UnschedulableGrace), cannot
// pull their image, crash-loop or failed, on pods the API server refused
// (Pod Security), on a list or watch raystep may not make, and on the
// RayCluster being deleted; ctx's cause otherwise.
func (i *Interactive) AwaitReady(ctx context.Context, rc *rayv1.RayCluster) (*rayv1.RayCluster, error) {
	return i.awaitReady(ctx, rc, false)
}

// AwaitWorkers is AwaitReady that also waits until every worker the
// RayCluster's spec asks for runs: a ready cluster whose released GPU
// workers up brought back stays ready while they start.
func (i *Interactive) AwaitWorkers(ctx context.Context, rc *rayv1.RayCluster) (*rayv1.RayCluster, error) {
	return i.awaitReady(ctx, rc, true)
}

func (i *Interactive) awaitReady(ctx context.Context, rc *rayv1.RayCluster, workers bool) (*rayv1.RayCluster, error) {
	m := i.newClusterMonitor(rc.Namespace, rc.Name)
	m.start()
	defer m.stop()
	var last *rayv1.RayCluster
	err := m.await(ctx, func(v view) (bool, error, time.Duration) {
		err, again := m.problem(v)
		if err == nil && v.gone() {
			err = &ClusterError{RayJob: rc.Namespace + "/" + rc.Name, Kind: kindRayCluster, Reason: "Deleted",
				Message: "the RayCluster is gone: someone other than this command deleted it"}
		}
		if err != nil || v.rc == nil {
			return false, err, again
		}
		last = v.rc
		return clusterReady(v.rc) && (!workers || workersRunning(v) >= wantWorkers(v.rc)), nil, again
	})
	return last, err
}

// Delete deletes the interactive cluster ns/name (only the one of uid,
// when set) in the foreground, so the garbage collector removes its pods,
// Services and token Secret, and waits by watch within ctx until the
// RayCluster and its pods are gone. The delete is issued even when ctx
// is already cancelled. A RayCluster already gone is fine.
func (i *Interactive) Delete(ctx context.Context, ns, name string, uid types.UID) error {
	m := i.newClusterMonitor(ns, name)
	m.markLeaving()
	m.start()
	defer m.stop()
	dctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), deleteGrace)
		defer cancel()
	}
	fg := metav1.DeletePropagationForeground
	opts := metav1.DeleteOptions{PropagationPolicy: &fg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := i.Ray.RayV1().RayClusters(ns).Delete(dctx, name, opts)
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		return fmt.Errorf("delete RayCluster %s/%s: it was replaced by another object of the same name: %w", ns, name, err)
	case err != nil:
		return fmt.Errorf("delete RayCluster %s/%s: %w", ns, name, err)
	}
	var last view
	err = m.await(ctx, func(v view) (bool, error, time.Duration) {
		last = v
		if v.blind {
			return false, v.denied, 0
		}
		return v.gone() && len(v.pods) == 0, nil, 0
	})
	if err != nil {
		return fmt.Errorf("wait for RayCluster %s/%s to be deleted: %w (%s)", ns, name, err, last.leftovers())
	}
	return i.awaitPodsGone(ctx, ns, name)
}

// awaitPodsGone asks the API server itself for the pods of the RayCluster
// name and waits by watch until each is gone. The pod watch can lag behind
// the RayCluster's: a head pod the operator made just before the delete
// may not have reached it when the RayCluster's deletion did, and the
// garbage collector removes such a pod only after its owner.
func (i *Interactive) awaitPodsGone(ctx context.Context, ns, name string) error {
	sel := labels.SelectorFromSet(labels.Set{labelCluster: name}).String()
	pods, err := i.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list the pods of RayCluster %s/%s: %w", ns, name, err)
	}
	for _, p := range pods.Items {
		if err := watchGone(ctx, i.Kube.CoreV1().Pods(ns), i.Kube, p.Name, &corev1.Pod{}); err != nil {
			return fmt.Errorf("wait for pod %s/%s of RayCluster %s to be deleted: %w", ns, p.Name, name, err)
		}
	}
	return nil
}

// Expiry returns when the interactive cluster rc expires, and false when
// its annotation is missing or not RFC 3339.
func Expiry(rc *rayv1.RayCluster) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, rc.Annotations[AnnotationExpires])
	return t, err == nil
}

// ClusterDashboardURL is the dashboard of rc by its head service's
// cluster DNS name, or "" before KubeRay made the service.
func ClusterDashboardURL(rc *rayv1.RayCluster) string {
	svc := rc.Status.Head.ServiceName
	if svc == "" {
		return ""
	}
	port := strconv.Itoa(dashboardPort)
	if p := rc.Status.Endpoints["dashboard"]; p != "" {
		port = p
	}
	return fmt.Sprintf("http://%s.%s.svc.cluster.local:%s", svc, rc.Namespace, port)
}

func (i *Interactive) clock() runner.Clock {
	if i.Clock != nil {
		return i.Clock
	}
	return runner.SystemClock{}
}

// wantWorkers is how many worker pods rc's spec asks for.
func wantWorkers(rc *rayv1.RayCluster) int {
	n := 0
	for _, g := range rc.Spec.WorkerGroupSpecs {
		n += int(ptrValue(g.Replicas) * max(1, g.NumOfHosts))
	}
	return n
}

// workersRunning counts the running worker pods in v not being deleted.
func workersRunning(v view) int {
	n := 0
	for _, p := range v.pods {
		if p.Labels["ray.io/node-type"] == "worker" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}
