package kuberay

import (
	"context"
	"fmt"
	"net/http"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
	"github.com/raystep/raystep/schemas"
)

// FieldManager is the field manager raystep's writes are recorded under.
const FieldManager = "raystep"

// Notify receives what the backend wants people to know while it works:
// warnings from the API server, warning events about the step's RayJob,
// RayCluster and pods, a re-attach. level is "INFO" or "WARNING". It may
// be called from several goroutines. A step's notices go to its events
// (runner.ClusterRequest.Events): see notifyEvents.
type Notify func(level, msg string)

// notifyEvents tells events each notice, as a KindNote or KindWarning
// event that the runner stamps with the step's phase, then calls also
// when it is set.
func notifyEvents(events runner.Sink, also Notify) Notify {
	return func(level, msg string) {
		kind := runner.KindNote
		if level == "WARNING" {
			kind = runner.KindWarning
		}
		if events != nil {
			events.Event(runner.Event{Kind: kind, Message: msg})
		}
		if also != nil {
			also(level, msg)
		}
	}
}

func (n Notify) warn(msg string) {
	if n != nil {
		n("WARNING", msg)
	}
}

func (n Notify) info(msg string) {
	if n != nil {
		n("INFO", msg)
	}
}

// DashboardOptions says how raystep reaches the Ray dashboard of a step's
// cluster. The first that applies wins: URL; the head service's cluster
// DNS name when InCluster; a port-forward to the head pod otherwise.
type DashboardOptions struct {
	// URL is an explicit dashboard URL (RAYSTEP_DASHBOARD_URL), e.g. an
	// ingress in front of the head service.
	URL string
	// Headers are sent with every dashboard request.
	Headers http.Header
	// Token is a bearer token for Ray's token authentication.
	Token string
	// CAFile is a PEM bundle to verify the dashboard's certificate.
	CAFile string
	// InCluster uses the head service's DNS name: set it when raystep runs
	// in a pod (KUBERNETES_SERVICE_HOST is set) unless the user turned it off.
	InCluster bool
}

// Backend is the KubeRay runner.Backend: each step's cluster is a RayJob
// in InteractiveMode, created from Spec and Profile by Build, watched
// until it is ready, given the submitted job's id, and deleted (with its
// RayCluster and pods) at teardown.
type Backend struct {
	// Kube and Ray are the clients; see Connect.
	Kube kubeapi.Interface
	Ray  kubeapi.RayInterface
	// Config is the REST config behind Kube, used for port-forwards; nil
	// disables them.
	Config *rest.Config
	// Dynamic reads Kueue's Workloads of queued steps; nil makes one from
	// Config (none without Config: a queued step is then told queued
	// without Kueue's reason).
	Dynamic dynamic.Interface
	// Spec and Profile describe the cluster: its pods, resources, runtime
	// env and deadlines. What the RayJob is for (name, labels) and where it
	// goes (namespace) come from the step Provision is handed, never from
	// them.
	Spec    *schemas.Spec
	Profile *schemas.Profile
	// Dashboard says how to reach the dashboard.
	Dashboard DashboardOptions
	// UnschedulableGrace is how long a pod may stay Unschedulable before the
	// step fails; zero fails at once. Set it where a cluster autoscaler
	// adds nodes on demand.
	UnschedulableGrace time.Duration
	// Notify, if set, also receives each notice (tests watch them there);
	// the step's events get them in any case.
	Notify Notify
	// Clock is the source of time: the Unschedulable grace is measured on
	// it and the heartbeat's renewTime read from it; nil means
	// runner.SystemClock.
	Clock runner.Clock
	// PortForwardGiveUp is how long a broken dashboard port-forward is
	// tried again before the step fails; zero means two minutes.
	PortForwardGiveUp time.Duration
	// HeartbeatInterval is how often the step renews its heartbeat Lease;
	// zero means HeartbeatInterval.
	HeartbeatInterval time.Duration
	// Holder names this step in its heartbeat Lease; empty means
	// "hostname/pid".
	Holder string
	// Cluster, if set, is an interactive RayCluster (see Interactive) the
	// step borrows: the RayJob selects it (spec.clusterSelector) instead of
	// describing a cluster of its own, and teardown deletes the RayJob but
	// never the cluster (interactive_borrow.go).
	Cluster string
	// Customize, if set, changes each RayJob after Build and before it is
	// created, for what the profile cannot express (an admission
	// controller's pod annotations; tests use it to make kwok fail a pod).
	// The profile's checks do not see its changes; the API server's Pod
	// Security admission does, and a Ray pod it refuses fails the step.
	Customize func(job *rayv1.RayJob)
}

var _ runner.Backend = (*Backend)(nil)

// Name returns "kuberay".
func (b *Backend) Name() string { return "kuberay" }

// Provision creates the step's RayJob, named step.ID in step.Namespace, or
// finds the one a previous attempt of the same step created (same step.ID,
// checked by its labels) and carries on with it, then creates its token
// Secret when the profile turns Ray's token authentication on (see
// auth.go) and starts watching it; what it and the cluster report goes to
// events. It does not wait for the
// cluster: see Cluster.Ready.
func (b *Backend) Provision(ctx context.Context, step runner.Step, events runner.Sink) (runner.Cluster, error) {
	b = b.forStep(events)
	job, err := b.rayJob(step)
	if err != nil {
		return nil, err
	}
	jobs := b.Ray.RayV1().RayJobs(job.Namespace)
	got, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: FieldManager})
	attached := apierrors.IsAlreadyExists(err)
	switch {
	case attached:
		got, err = jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get existing RayJob %s/%s: %w", job.Namespace, job.Name, err)
		}
		if err := sameStep(got, job); err != nil {
			return nil, err
		}
		b.Notify.info(fmt.Sprintf("RayJob %s/%s exists (created %s): re-attaching", job.Namespace, job.Name, got.CreationTimestamp.UTC().Format(time.RFC3339)))
	case err != nil && certainlyNotCreated(err):
		return nil, fmt.Errorf("create RayJob %s/%s: %w", job.Namespace, job.Name, err)
	case err != nil:
		// The RayJob may exist (a timeout after the server took it): hand
		// back a cluster so that teardown deletes it.
		c := b.newCluster(job)
		c.mon.start()
		return c, fmt.Errorf("create RayJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	c := b.newCluster(got)
	c.mon.start()
	if err := c.authorize(ctx, got, attached); err != nil {
		return c, err
	}
	if got.UID != "" { // always, but from the API server
		c.hb = b.newHeartbeat(got)
		if err := c.hb.start(ctx, c.report); err != nil {
			return c, err // teardown deletes the RayJob
		}
	}
	return c, nil
}

// rayJob builds the RayJob for the resolved step.
func (b *Backend) rayJob(step runner.Step) (*rayv1.RayJob, error) {
	if b.Kube == nil || b.Ray == nil || b.Spec == nil || b.Profile == nil {
		return nil, fmt.Errorf("kuberay backend: Kube, Ray, Spec and Profile are required")
	}
	if step.Namespace == "" {
		return nil, fmt.Errorf("kuberay backend: no namespace for RayJob %s", step.ID)
	}
	job, err := Build(b.Spec, b.Profile, step)
	if err != nil {
		return nil, err
	}
	if b.Cluster != "" {
		borrow(job, b.Cluster)
	}
	if b.Customize != nil {
		b.Customize(job)
	}
	return job, nil
}

// sameStep checks that an existing RayJob was made for the same step
// attempt as want: raystep's, same run, step and retry.
func sameStep(got, want *rayv1.RayJob) error {
	for _, k := range []string{LabelManagedBy, LabelRunID, LabelStep, LabelRetry} {
		if got.Labels[k] != want.Labels[k] {
			return fmt.Errorf("RayJob %s/%s exists but was not created for this step: label %s is %q, want %q",
				got.Namespace, got.Name, k, got.Labels[k], want.Labels[k])
		}
	}
	if got.DeletionTimestamp != nil {
		return fmt.Errorf("RayJob %s/%s of this step is being deleted (since %s): retry once it is gone",
			got.Namespace, got.Name, got.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	return nil
}

// certainlyNotCreated reports whether a create error means the API server
// refused the object, as opposed to an outcome raystep cannot know.
func certainlyNotCreated(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err) || apierrors.IsMethodNotSupported(err)
}

// forStep returns a copy of b whose notices go to the step's events.
// The API server's warnings on these clients go to the step's events too.
func (b *Backend) forStep(events runner.Sink) *Backend {
	c := *b
	c.Notify = notifyEvents(events, b.Notify)
	if b.Config != nil {
		if w, ok := b.Config.WarningHandlerWithContext.(*warnOnce); ok {
			w.tell(events)
		}
	}
	return &c
}

func (b *Backend) clock() runner.Clock {
	if b.Clock != nil {
		return b.Clock
	}
	return runner.SystemClock{}
}
