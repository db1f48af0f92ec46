package kuberay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

func waiting(reason string, msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "ray-head", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}
}

func unschedulable(msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
		LastTransitionTime: metav1.Now()}}}
}

// TestReadyFailsFast: every reason a cluster will never be ready ends Ready
// at once with a ClusterError carrying Kubernetes' or KubeRay's own words.
func TestReadyFailsFast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status *rayv1.RayJobStatus
		pod    *corev1.PodStatus
		podTyp string
		want   ClusterError
	}{
		{name: "validation failed", status: &rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusValidationFailed,
			Reason: rayv1.ValidationFailed, Message: "BackoffLimit is incompatible with InteractiveMode"},
			want: ClusterError{Reason: "ValidationFailed", Message: "BackoffLimit is incompatible with InteractiveMode"}},
		{name: "pre-running deadline", status: &rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed,
			Reason: rayv1.PreRunningDeadlineExceeded, Message: "The RayJob has passed the preRunningDeadlineSeconds."},
			want: ClusterError{Reason: "PreRunningDeadlineExceeded", Message: "The RayJob has passed the preRunningDeadlineSeconds."}},
		{name: "unschedulable worker", podTyp: "worker", pod: ptr(unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")),
			want: ClusterError{Pod: "pod-worker", Reason: "Unschedulable", Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}},
		{name: "image pull back-off", podTyp: "head", pod: ptr(waiting("ImagePullBackOff", `Back-off pulling image "rayproject/ray:nope"`)),
			want: ClusterError{Pod: "pod-head", Reason: "ImagePullBackOff", Message: `container ray-head: Back-off pulling image "rayproject/ray:nope"`}},
		{name: "err image pull", podTyp: "head", pod: ptr(waiting("ErrImagePull", "manifest unknown")),
			want: ClusterError{Pod: "pod-head", Reason: "ErrImagePull", Message: "container ray-head: manifest unknown"}},
		{name: "crash loop", podTyp: "head", pod: ptr(waiting("CrashLoopBackOff", "back-off 20s restarting failed container")),
			want: ClusterError{Pod: "pod-head", Reason: "CrashLoopBackOff", Message: "container ray-head: back-off 20s restarting failed container, 0 restarts"}},
		{name: "secret not found", podTyp: "head", pod: ptr(waiting("CreateContainerConfigError", `secret "s3-credentials" not found`)),
			want: ClusterError{Pod: "pod-head", Reason: "CreateContainerConfigError", Message: `container ray-head: secret "s3-credentials" not found`}},
		{name: "evicted head", podTyp: "head", pod: &corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."},
			want: ClusterError{Pod: "pod-head", Reason: "PodFailed", Message: "Evicted The node was low on resource: memory."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakes(t)
			c := f.provision(t, request(0))
			f.initializing(t, c)
			if tt.status != nil {
				tt.status.RayClusterName = c.name + "-abcde"
				f.setStatus(t, c.name, *tt.status)
			}
			if tt.pod != nil {
				f.addPod(t, c, "pod-"+tt.podTyp, tt.podTyp, *tt.pod)
			}
			err := c.Ready(t.Context())
			var ce *ClusterError
			if !errors.As(err, &ce) || !errors.Is(err, ErrClusterFailed) {
				t.Fatalf("Ready = %v, want a ClusterError", err)
			}
			want := tt.want
			want.RayJob = c.Name()
			if diff := cmp.Diff(want, *ce); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			select {
			case ferr := <-c.Failures():
				if ferr.Error() != err.Error() {
					t.Errorf("Failures() = %v, want %v", ferr, err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Failures() reported nothing")
			}
		})
	}
}

// TestTokenSecretNotYetThere: raystep creates a RayJob's token Secret just
// after the RayJob, so a kubelet may start the head before the Secret
// exists. Its CreateContainerConfigError for that Secret does not fail
// Ready (the kubelet retries); Ready succeeds once the cluster is ready.
func TestTokenSecretNotYetThere(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{`secret %q not found`, `secrets %q not found`} {
		t.Run(msg, func(t *testing.T) {
			t.Parallel()
			f := newFakes(t)
			c := f.provision(t, request(0))
			f.initializing(t, c)
			f.addPod(t, c, "pod-head", "head", waiting("CreateContainerConfigError", fmt.Sprintf(msg, AuthSecretName(c.name))))
			await(t, c, "waiting head pod seen", func(v view) bool { return len(v.pods) == 1 })
			if err := c.Ready(cancelled(t)); !errors.Is(err, context.Canceled) {
				t.Fatalf("Ready while the head waits for its token Secret = %v, want still waiting", err)
			}
			f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
			if err := c.Ready(t.Context()); err != nil {
				t.Fatalf("Ready once the cluster is ready = %v", err)
			}
		})
	}
}

// TestUnschedulableGrace: within the grace an Unschedulable pod does not
// fail Ready (a cancelled Ready looks once and says it is still waiting),
// and Ready succeeds once the cluster is ready.
func TestUnschedulableGrace(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.fakeClock() // the hour of grace never passes
	f.b.UnschedulableGrace = time.Hour
	c := f.provision(t, request(0))
	f.initializing(t, c)
	f.addPod(t, c, "pod-worker", "worker", unschedulable("0/2 nodes are available"))
	await(t, c, "unschedulable pod seen", func(v view) bool { return len(v.pods) == 1 })
	if err := c.Ready(cancelled(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready within the grace = %v, want still waiting", err)
	}
	f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
	if err := c.Ready(t.Context()); err != nil {
		t.Fatalf("Ready with a pod Unschedulable within the grace: %v", err)
	}
}

// TestFailuresWhileRunning: once ready, a deadline, a deleted RayJob or a
// broken head is reported; a broken worker and the job's own failure are
// not. For those, a broken head named to sort after every other pod
// follows: it must be the first failure reported, which it is only if
// what came before was not one (the monitor looks at the RayJob before
// the pods, and at pods in name order).
func TestFailuresWhileRunning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		act    func(t *testing.T, f *fakes, c *Cluster)
		reason string // "" means nothing reported
		pod    string // the pod the failure names
	}{
		{"active deadline", func(t *testing.T, f *fakes, c *Cluster) {
			f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, Reason: rayv1.DeadlineExceeded,
				Message: "The RayJob has passed the activeDeadlineSeconds.", RayClusterName: c.name + "-abcde"})
		}, "DeadlineExceeded", ""},
		{"deleted by someone", func(t *testing.T, f *fakes, c *Cluster) {
			if err := f.ray.RayV1().RayJobs(testNS).Delete(t.Context(), c.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "Deleted", ""},
		{"head crash loop", func(t *testing.T, f *fakes, c *Cluster) {
			f.addPod(t, c, "pod-head", "head", waiting("CrashLoopBackOff", "back-off"))
		}, "CrashLoopBackOff", "pod-head"},
		{"worker crash loop", func(t *testing.T, f *fakes, c *Cluster) {
			f.addPod(t, c, "pod-worker", "worker", waiting("CrashLoopBackOff", "back-off"))
			f.awaitNote(t, "pod-worker: CrashLoopBackOff") // a warning instead
		}, "", ""},
		{"ray job failed", func(t *testing.T, f *fakes, c *Cluster) {
			f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, Reason: rayv1.AppFailed,
				JobStatus: rayv1.JobStatusFailed, RayClusterName: c.name + "-abcde"})
			await(t, c, "AppFailed seen", func(v view) bool { return v.job.Status.Reason == rayv1.AppFailed })
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakes(t)
			c := f.ready(t)
			tt.act(t, f, c)
			want := ClusterError{Reason: tt.reason, Pod: tt.pod}
			if tt.reason == "" {
				f.addPod(t, c, "zz-sentinel-head", "head", waiting("ImagePullBackOff", "sentinel"))
				want = ClusterError{Reason: "ImagePullBackOff", Pod: "zz-sentinel-head"}
			}
			select {
			case err := <-c.Failures():
				var ce *ClusterError
				if !errors.As(err, &ce) || ce.Reason != want.Reason || ce.Pod != want.Pod {
					t.Errorf("first failure = %v, want reason %q (pod %q)", err, want.Reason, want.Pod)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Failures() reported nothing after 10s, want %s", want.Reason)
			}
		})
	}
}

func TestSetJobIDIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	for range 2 {
		if err := c.SetJobID(t.Context(), c.name); err != nil {
			t.Fatal(err)
		}
		await(t, c, "jobId seen", func(v view) bool { return v.job.Spec.JobId == c.name })
	}
	patches := 0
	for _, a := range f.ray.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("%d patches, want 1", patches)
	}
}

// TestTeardownWaitsUntilGone: the delete is foreground, and Teardown
// returns only once the RayJob (held by a finalizer here) is really gone.
func TestTeardownWaitsUntilGone(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	var policy metav1.DeletionPropagation
	f.ray.PrependReactor("delete", "rayjobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		policy = *a.(k8stesting.DeleteActionImpl).DeleteOptions.PropagationPolicy
		job, err := f.ray.Tracker().Get(rayv1.SchemeGroupVersion.WithResource("rayjobs"), testNS, c.name)
		if err != nil {
			return true, nil, err
		}
		j := job.(*rayv1.RayJob).DeepCopy()
		j.DeletionTimestamp = ptr(metav1.Now())
		j.Finalizers = []string{"ray.io/rayjob-stop-job"}
		return true, nil, f.ray.Tracker().Update(rayv1.SchemeGroupVersion.WithResource("rayjobs"), j, testNS)
	})
	done := make(chan error, 1)
	go func() { done <- c.Teardown(t.Context(), false) }()
	await(t, c, "deletion seen", func(v view) bool { return v.job.DeletionTimestamp != nil })
	if err := f.ray.Tracker().Delete(rayv1.SchemeGroupVersion.WithResource("rayjobs"), testNS, c.name); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if policy != metav1.DeletePropagationForeground {
		t.Errorf("propagation %q, want Foreground", policy)
	}
}

// TestTeardownTimeoutSaysWhatIsLeft: a Teardown whose context ends while
// the RayJob still exists (held by a finalizer nobody removes) does not
// report success, and says what is left. With an already cancelled
// context it looks once, so the test waits for nothing.
func TestTeardownTimeoutSaysWhatIsLeft(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	f.ray.PrependReactor("delete", "rayjobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // a finalizer nobody removes
	})
	err := c.Teardown(cancelled(t), false)
	if err == nil || !strings.Contains(err.Error(), "RayJob still exists") {
		t.Fatalf("Teardown = %v, want a timeout naming the RayJob", err)
	}
}

func TestTeardownIssuesTheDeleteEvenWhenCancelled(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = c.Teardown(ctx, false)
	if _, err := f.ray.RayV1().RayJobs(testNS).Get(t.Context(), c.name, metav1.GetOptions{}); err == nil {
		t.Errorf("RayJob still exists after a cancelled teardown")
	}
}

func TestTeardownKeep(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	if err := c.Teardown(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.ray.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("kept cluster was deleted: %v", a)
		}
	}
	if !f.noted("kept") {
		t.Errorf("no note about the kept RayJob in %q", f.notes)
	}
}

// TestForbiddenWatches: a refused list of RayJobs, pods or events fails
// Ready at once with the API server's Forbidden; teardown, which cannot
// see RayJobs or pods go without their watch, says so at once instead of
// waiting for its deadline.
func TestForbiddenWatches(t *testing.T) {
	t.Parallel()
	forbid := func(resource string) k8stesting.ReactionFunc {
		return func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: access denied"))
		}
	}
	for _, tt := range []struct {
		resource  string
		blindGone bool // teardown cannot see it go
	}{{"rayjobs", true}, {"pods", true}, {"events", false}} {
		t.Run(tt.resource, func(t *testing.T) {
			t.Parallel()
			f := newFakes(t)
			if tt.resource == "rayjobs" {
				f.ray.PrependReactor("list", tt.resource, forbid(tt.resource))
			} else {
				f.kube.PrependReactor("list", tt.resource, forbid(tt.resource))
			}
			cl, err := f.b.Provision(t.Context(), request(0), f.sink())
			if err != nil {
				t.Fatal(err)
			}
			c := cl.(*Cluster)
			t.Cleanup(func() { c.stopWatching(t) })
			if tt.resource != "rayjobs" {
				f.awaitRayJobWatch(t, c)
			}
			if tt.resource == "pods" {
				f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing, RayClusterName: c.name + "-abcde"})
			}
			want := map[string]string{"rayjobs": "watch RayJob ", "pods": "watch Pods of RayJob ", "events": "watch Events of RayJob "}[tt.resource] + c.Name()
			if err := c.Ready(t.Context()); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Ready = %v, want Forbidden saying %q", err, want)
			}
			err = c.Teardown(t.Context(), false)
			if got := apierrors.IsForbidden(err); got != tt.blindGone {
				t.Fatalf("Teardown = %v, want Forbidden %v", err, tt.blindGone)
			}
		})
	}
}

// TestFatalKubeRayEvent: KubeRay's warning that the head's service account
// is missing ends Ready at once; an old one (a previous attempt's) is only
// shown, and Ready goes on to succeed.
func TestFatalKubeRayEvent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		age   time.Duration
		fatal bool
	}{{"fresh", 0, true}, {"stale", time.Hour, false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakes(t)
			c := f.provision(t, request(0))
			f.awaitWatch(t, "events")
			ev := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: c.name + "-abcde.1", Namespace: testNS},
				InvolvedObject: corev1.ObjectReference{Kind: "RayCluster", Name: c.name + "-abcde", Namespace: testNS},
				Type:           corev1.EventTypeWarning, Reason: "AutoscalerServiceAccountNotFound",
				Message:       "ServiceAccount raystep-job is not found. Please create one.",
				LastTimestamp: metav1.NewTime(time.Now().Add(-tt.age)),
			}
			if _, err := f.kube.CoreV1().Events(testNS).Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The event is shown either way, once the monitor decided on it.
			f.awaitNote(t, "WARNING RayCluster "+c.name+"-abcde: AutoscalerServiceAccountNotFound")
			err := c.Ready(cancelled(t))
			var ce *ClusterError
			if got := errors.As(err, &ce) && ce.Reason == "AutoscalerServiceAccountNotFound"; got != tt.fatal {
				t.Fatalf("Ready = %v, want fatal %v", err, tt.fatal)
			}
			if tt.fatal {
				return
			}
			f.setStatus(t, c.name, rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting, RayClusterName: c.name + "-abcde"})
			if err := c.Ready(t.Context()); err != nil {
				t.Errorf("Ready after a stale fatal event: %v", err)
			}
		})
	}
}
