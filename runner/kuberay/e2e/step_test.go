package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/test/cluster"
)

// TestStepSucceeds runs a whole step: RayJob created, Waiting, job
// submitted on the real head, spec.jobId set, followed to SUCCEEDED, and
// the RayJob, RayCluster and pods deleted. It reports the API requests the
// step made and the times the issue asks for.
func TestStepSucceeds(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-success")
	cnt := &counter{}
	b := backend(t, spec(t), ns, nil, cnt)
	res, err := newRunner(t, b).Run(t.Context(), step(b.Spec, runID(t)))
	if err != nil {
		t.Fatalf("step failed: %v", err)
	}
	if res.Job.Status != runner.StatusSucceeded {
		t.Errorf("job status %s, want SUCCEEDED", res.Job.Status)
	}
	nothingLeft(t, ns)
	d := res.Durations
	t.Logf("FIGURES provision(create->Waiting)=%s ready->submitted=%s (dashboard %s + upload %s + submit %s) run=%s teardown(job end->RayJob, RayCluster, pods gone)=%s",
		d[runner.PhaseProvision], d[runner.PhaseDashboard]+d[runner.PhaseUpload]+d[runner.PhaseSubmit],
		d[runner.PhaseDashboard], d[runner.PhaseUpload], d[runner.PhaseSubmit], d[runner.PhaseRun], d[runner.PhaseTeardown])
	t.Logf("FIGURES API %s", cnt)
	counts, total := cnt.counts()
	for kind, n := range counts {
		if strings.HasPrefix(kind, "get ") || strings.HasPrefix(kind, "list ") {
			if n > 3 {
				t.Errorf("%d %q requests: the backend polls instead of watching", n, kind)
			}
		}
	}
	if total > 30 {
		t.Errorf("%d API requests for one step, want a handful (watches, not polling)", total)
	}
}

// TestRayJobFails: a job that exits non-zero fails the step as a job
// failure (exit 1), and the cluster is still removed.
func TestRayJobFails(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-jobfails")
	b := backend(t, spec(t, `spec.entrypoint=python -c "import sys; print('boom'); sys.exit(3)"`), ns, nil, nil)
	_, err := newRunner(t, b).Run(t.Context(), step(b.Spec, runID(t)))
	if !errors.Is(err, runner.ErrJobFailed) || errors.Is(err, runner.ErrInfrastructure) {
		t.Fatalf("step error = %v, want only a Ray job failure", err)
	}
	nothingLeft(t, ns)
}

// TestProvisionFailsFast: a head whose image cannot be pulled and a worker
// no node can take fail the step at once (not at the provision timeout)
// as an infrastructure failure carrying Kubernetes' own message.
func TestProvisionFailsFast(t *testing.T) {
	t.Parallel()
	setup(t)
	pull := `Back-off pulling image "rayproject/ray:2.60.0-py311": not found`
	tests := []struct {
		name, ns  string
		set       []string
		customize func(*rayv1.RayJob)
		reason    string
		message   string
	}{
		{name: "head ImagePullBackOff", ns: "e2e-pullbackoff", reason: "ImagePullBackOff", message: pull,
			customize: func(j *rayv1.RayJob) {
				j.Spec.RayClusterSpec.HeadGroupSpec.Template.Annotations = cluster.PodWaitingAnnotations("ImagePullBackOff", pull)
			}},
		{name: "worker Unschedulable", ns: "e2e-unschedulable", set: []string{"spec.cluster.workers.0.gpuType=l4"},
			reason: "Unschedulable", message: "didn't match Pod's node affinity/selector"},
		// Autoscaling needs the head's service account (the profile's
		// raystep-job), which this namespace does not have.
		{name: "autoscaler without service account", ns: "e2e-nosa",
			set:    []string{"spec.cluster.workers.0.minReplicas=0", "spec.cluster.workers.0.maxReplicas=2"},
			reason: "AutoscalerServiceAccountNotFound", message: "ServiceAccount raystep-job is not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, tt.ns)
			b := backend(t, spec(t, tt.set...), ns, nil, nil)
			b.Customize = tt.customize
			res, err := newRunner(t, b).Run(t.Context(), step(b.Spec, runID(t)))
			took := res.Durations[runner.PhaseProvision]
			var ce *kuberay.ClusterError
			if !errors.Is(err, runner.ErrInfrastructure) || !errors.As(err, &ce) {
				t.Fatalf("step error = %v, want an infrastructure failure from the cluster", err)
			}
			if ce.Reason != tt.reason || !strings.Contains(ce.Message, tt.message) {
				t.Errorf("reason %q message %q, want %q containing %q", ce.Reason, ce.Message, tt.reason, tt.message)
			}
			if took > time.Minute {
				t.Errorf("failed after %s, want well before the 3m provision timeout", took)
			}
			t.Logf("FIGURES %s: provisioning failed after %s (teardown %s): %v", tt.name, took.Round(time.Millisecond),
				res.Durations[runner.PhaseTeardown].Round(time.Millisecond), err)
			nothingLeft(t, ns)
		})
	}
}

// TestCancel: SIGTERM (a cancelled context) at each phase of the RayJob
// leaves nothing behind: no RayJob, RayCluster or pod, and no Ray job.
func TestCancel(t *testing.T) {
	t.Parallel()
	setup(t)
	for _, at := range []rayv1.JobDeploymentStatus{rayv1.JobDeploymentStatusInitializing, rayv1.JobDeploymentStatusWaiting, rayv1.JobDeploymentStatusRunning} {
		t.Run(string(at), func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, "e2e-cancel-"+strings.ToLower(string(at)))
			b := backend(t, spec(t, `spec.entrypoint=python -c "import time; time.sleep(300)"`), ns, nil, nil)
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			go func() {
				waitStatus(ctx, ns, at)
				cancel(errors.New("received terminated"))
			}()
			res, err := newRunner(t, b).Run(ctx, step(b.Spec, runID(t)))
			if !errors.Is(err, runner.ErrCancelled) {
				t.Fatalf("step error = %v, want cancelled", err)
			}
			nothingLeft(t, ns)
			if at == rayv1.JobDeploymentStatusRunning && !res.Job.Status.Terminal() {
				t.Errorf("ray job %s after cancel, want stopped", res.Job.Status)
			}
		})
	}
}

// TestCancelAfterTokenSecretDeleted: a step whose token Secret someone
// deleted while its RayJob was Initializing, then cancelled, makes the
// Secret again before deleting the RayJob, says so, and leaves nothing:
// without it KubeRay cannot build the client it stops the job with, keeps
// the deleted RayJob by its finalizer, and the RayCluster and pods stay.
func TestCancelAfterTokenSecretDeleted(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-cancel-secret-deleted")
	b := backend(t, spec(t, `spec.entrypoint=python -c "import time; time.sleep(300)"`), ns, nil, nil)
	var mu sync.Mutex
	var notes []string
	b.Notify = func(level, msg string) {
		t.Logf("backend %s: %s", level, msg)
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, msg)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	go func() {
		defer cancel(errors.New("received terminated"))
		waitStatus(ctx, ns, rayv1.JobDeploymentStatusInitializing)
		// The step creates the Secret right after the RayJob; on a busy
		// machine KubeRay may reach Initializing first.
		secrets := &corev1.SecretList{}
		for ctx.Err() == nil && len(secrets.Items) == 0 {
			if err := shared.k8s.Client.List(ctx, secrets, client.InNamespace(ns)); err != nil || len(secrets.Items) == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		for _, s := range secrets.Items {
			if err := shared.k8s.Client.Delete(ctx, &s); err != nil {
				t.Errorf("delete Secret %s: %v", s.Name, err)
			}
		}
	}()
	_, err := newRunner(t, b).Run(ctx, step(b.Spec, runID(t)))
	if !errors.Is(err, runner.ErrCancelled) {
		t.Fatalf("step error = %v, want cancelled", err)
	}
	nothingLeft(t, ns)
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "was deleted while the step ran") }) {
		t.Errorf("the step did not say it made the token Secret again: %q", notes)
	}
}

// waitStatus returns once a RayJob in ns reaches status, or ctx ends.
func waitStatus(ctx context.Context, ns string, status rayv1.JobDeploymentStatus) {
	for ctx.Err() == nil {
		jobs := &rayv1.RayJobList{}
		if err := shared.k8s.Client.List(ctx, jobs, client.InNamespace(ns)); err == nil {
			for _, j := range jobs.Items {
				if j.Status.JobDeploymentStatus == status {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestReattachAfterKill: a step killed after submitting (nothing torn
// down) is restarted with the same run id; the restart finds its RayJob
// and its Ray job, follows it to the end and cleans up: one RayJob, one
// Ray job.
func TestReattachAfterKill(t *testing.T) {
	t.Parallel()
	setup(t)
	ns := namespace(t, "e2e-reattach")
	s := spec(t, `spec.entrypoint=python -c "import time; print('attempt output'); time.sleep(8)"`)
	killed := backend(t, s, ns, nil, nil)
	st := runner.Resolve(step(s, runID(t)), nil)
	id := runner.StepID(st.Name, st.Dagster.RunID, st.Dagster.Key(), 0)
	cl, err := killed.Provision(t.Context(), st, runner.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	d, err := cl.Dashboard(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := adapters.Connect(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Submit(t.Context(), runner.JobRequest{SubmissionID: id, Entrypoint: s.Spec.Entrypoint}); err != nil {
		t.Fatal(err)
	}
	if err := cl.SetJobID(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	_ = cl.Teardown(t.Context(), true) // SIGKILL: this process just goes away
	created := rayJobUID(t, ns, id)

	res, err := newRunner(t, backend(t, s, ns, nil, nil)).Run(t.Context(), st)
	if err != nil {
		t.Fatalf("restarted step: %v", err)
	}
	if !res.Attached || res.ID != id {
		t.Errorf("result attached=%v id=%s, want attached to %s", res.Attached, res.ID, id)
	}
	if created == "" {
		t.Errorf("the killed attempt left no RayJob to attach to")
	}
	nothingLeft(t, ns)
}

func rayJobUID(t *testing.T, ns, name string) string {
	t.Helper()
	c, err := kuberay.NewClients(shared.k8s.Config, kuberay.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Ray.RayV1().RayJobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return string(j.UID)
}
