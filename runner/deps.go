package runner

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// Backend provisions the Ray cluster a step runs on. The local backend
// starts a private Ray head (or borrows RAY_ADDRESS); the KubeRay backend
// creates a RayJob. A backend is built by the caller for one spec, so it
// already knows the cluster's shape; the step it is handed says which
// attempt the cluster is for and where it goes.
type Backend interface {
	// Name is the backend's name as reported in metadata: "local" or "kuberay".
	Name() string
	// Provision creates the cluster for the resolved step (see Resolve), or
	// finds the one a previous attempt of the same step created (same
	// step.ID), without waiting for it to be ready. The step is a copy the
	// backend only reads: its ID names the cluster (a DNS-1035 label of at
	// most 47 characters), its RunID, Dagster.StepKey, Dagster.RetryNumber
	// and Dagster.AssetKeys label it, its Namespace places it. events is the
	// step's event stream, for what the backend wants people to know while
	// the cluster lives (warning events about its pods, a re-attach): emit
	// KindNote or KindWarning events with Phase left empty, and the runner
	// stamps them with the step's phase and time and tells the console and
	// Dagster; it is safe for concurrent use and never nil. Provision
	// returns a nil Cluster only when nothing was created; a non-nil Cluster
	// is always torn down, even when err is not nil.
	Provision(ctx context.Context, step Step, events Sink) (Cluster, error)
}

// Cluster is one provisioned Ray cluster.
type Cluster interface {
	// Name names the cluster for people and metadata, for example
	// "ml-ads/raystep-train-3f2a9c1b7d0e" or "127.0.0.1:6379".
	Name() string
	// Ready waits until the cluster can take a job, and fails fast when it
	// never will (Unschedulable, ImagePullBackOff, a head that exited).
	Ready(ctx context.Context) error
	// Dashboard reaches the Ray dashboard: an explicit URL, a cluster DNS
	// name or a port-forward that lives until Teardown.
	Dashboard(ctx context.Context) (Dashboard, error)
	// SetJobID records the submitted job on the cluster (KubeRay sets the
	// RayJob's spec.jobId; the local backend does nothing). It is called
	// after every submit or attach and must be idempotent.
	SetJobID(ctx context.Context, submissionID string) error
	// Failures reports infrastructure failures while the job runs (pod
	// failures, deadlines, a head that exited). A nil channel means the
	// backend has nothing to report. The runner stops reading it at
	// teardown; sends should not block forever (buffer one, or select on
	// a done channel closed by Teardown).
	Failures() <-chan error
	// Teardown is called exactly once, on every path. With keep false it
	// deletes the cluster and waits, within ctx, until it is gone; with keep
	// true (teardown policy never, or on_success after a failure) it leaves
	// the cluster running and only releases what this process holds for it
	// (port-forwards, watches). ctx may already be cancelled when the user
	// insisted (second signal): the deletion must still be issued.
	Teardown(ctx context.Context, keep bool) error
}

// Disrupted is implemented by a Cluster that can lose pods to
// disruptions (preemption, eviction, node loss). Disruption returns the
// first one seen since the job ran, wrapping ErrPreempted, or nil: a job
// that failed on a disrupted cluster is a preemption, not the job's
// fault.
type Disrupted interface {
	Disruption() error
}

// Queued is implemented by a Cluster that may wait in a queue before it
// is provisioned (a RayJob behind Kueue). Admitted returns once the queue
// admitted it (at once when it is not queued), or fails as Ready does.
// With Step.QueueTimeout the runner measures the wait until Admitted
// returns on that clock, and provisioning on ProvisionTimeout from then.
type Queued interface {
	Admitted(ctx context.Context) error
}

// Borrowed is implemented by a Cluster that the step uses but does not own
// (an existing Ray cluster named by RAY_ADDRESS): its Teardown leaves it
// running whatever the policy, and the step says so instead of "deleted".
type Borrowed interface {
	Borrowed() bool
}

// OutcomeRecorder is implemented by a Cluster that can note on itself how
// its Ray job ended before teardown deletes it, so a viewer of the cluster
// (raystep ui) sees SUCCEEDED or FAILED while the cluster goes.
type OutcomeRecorder interface {
	RecordOutcome(ctx context.Context, status JobStatus) error
}

// Dashboard tells how to reach a cluster's Ray dashboard.
type Dashboard struct {
	// URL is where raystep sends Jobs API requests, e.g. http://127.0.0.1:8265.
	URL string
	// PublicURL is the URL shown to people and reported in metadata when URL
	// is only reachable from here (a port-forward); empty means URL.
	PublicURL string
	// Headers are sent with every request.
	Headers http.Header
	// Token is a bearer token for Ray's token authentication.
	Token string
	// CAFile is a PEM bundle to verify the dashboard's TLS certificate.
	CAFile string
}

// shownURL returns the URL to show people.
func (d Dashboard) shownURL() string {
	if d.PublicURL != "" {
		return d.PublicURL
	}
	return d.URL
}

// Jobs is the part of the Ray Jobs API the runner uses. Connect in Runner
// builds one for a cluster's Dashboard.
type Jobs interface {
	// UploadPackage uploads a working dir's package (Runner.Pack) unless
	// the cluster has it already.
	UploadPackage(ctx context.Context, pkg Package) error
	// Submit submits a job and returns its submission id. An error wrapping
	// ErrAlreadySubmitted means req.SubmissionID is taken: the job exists.
	Submit(ctx context.Context, req JobRequest) (submissionID string, err error)
	// Get returns what Ray knows about a job; an error wrapping ErrNotFound
	// when Ray knows nothing.
	Get(ctx context.Context, submissionID string) (JobInfo, error)
	// Stop asks Ray to stop a job; stopped is false when it had already
	// ended. An error wrapping ErrNotFound is fine at teardown.
	Stop(ctx context.Context, submissionID string) (stopped bool, err error)
	// Tail calls onLine, in order and from the calling goroutine, with each
	// line of the job's log from the first one, once, without the newline,
	// and returns nil when the job has ended and every line was delivered.
	// Tail reconnects by itself: while the dashboard does not answer it
	// calls onOutage (from the calling goroutine) after each failed try, and
	// once with a nil Err when the dashboard answers again; it gives up
	// with an error wrapping ErrUnreachable when its budget is spent.
	Tail(ctx context.Context, submissionID string, onLine func(line string), onOutage func(Outage)) error
}

// Outage describes a dashboard that stopped answering while Tail follows
// the job's log.
type Outage struct {
	// For is how long the dashboard has not answered.
	For time.Duration
	// Limit is how long Tail keeps trying in all.
	Limit time.Duration
	// Err is the last failure; nil once the dashboard answers again.
	Err error
}

// ErrUnreachable is wrapped by Jobs.Tail when the dashboard did not answer
// for the whole of its budget.
var ErrUnreachable = errors.New("dashboard not answering")

// ErrAlreadySubmitted is wrapped by Jobs.Submit when the submission id is
// taken: a previous attempt of this step submitted the job.
var ErrAlreadySubmitted = errors.New("submission id already used")

// ErrNotFound is wrapped by Jobs.Get and Jobs.Stop for an unknown job.
var ErrNotFound = errors.New("job not found")

// ErrClusterGone is wrapped by a failure a Cluster reports (Failures) when
// nothing of the cluster runs any more, the job's processes included, as a
// private head's keeper confirms: the runner then does not ask the dead
// dashboard to stop the job. Gone marks a failure so.
var ErrClusterGone = errors.New("the cluster is gone, with the job")

// Gone returns err marked as the end of the whole cluster (ErrClusterGone),
// its message unchanged.
func Gone(err error) error { return &goneError{err} }

type goneError struct{ error }

func (e *goneError) Unwrap() []error { return []error{e.error, ErrClusterGone} }

// JobRequest is one Ray job submission.
type JobRequest struct {
	// SubmissionID is the deterministic id the job is submitted under.
	SubmissionID string
	// Entrypoint is the shell command the driver runs.
	Entrypoint string
	// RuntimeEnv is Ray's runtime_env, with working_dir and the Pipes
	// bootstrap in env_vars already filled in.
	RuntimeEnv map[string]any
	// Metadata is attached to the job (Dagster run id, step, spec).
	Metadata map[string]string
	// Resources reserve capacity for the driver.
	Resources Resources
}

// JobStatus is a Ray job's status.
type JobStatus string

// The statuses of a Ray job; the last three are terminal.
const (
	StatusPending   JobStatus = "PENDING"
	StatusRunning   JobStatus = "RUNNING"
	StatusStopped   JobStatus = "STOPPED"
	StatusSucceeded JobStatus = "SUCCEEDED"
	StatusFailed    JobStatus = "FAILED"
)

// Terminal reports whether the job has ended.
func (s JobStatus) Terminal() bool {
	return s == StatusStopped || s == StatusSucceeded || s == StatusFailed
}

// JobInfo is what Ray says about a job.
type JobInfo struct {
	// JobID is Ray's own job id, empty until the driver started.
	JobID string
	// Status is the job's status.
	Status JobStatus
	// Message is Ray's explanation, e.g. the driver's last error line.
	Message string
	// DriverExitCode is the driver's exit code once known.
	DriverExitCode *int
	// Start and End are when the job started and ended; zero when unknown.
	Start, End time.Time
}

// Session is the Dagster side of the step: the Pipes session the caller
// opened (and sent "opened" on). A nil Session means raystep runs
// standalone and the runner renders everything for a person instead.
type Session interface {
	// Send writes one message. An error wrapping ErrInvalidMessage means
	// the message was refused and nothing was written; the session is still
	// usable.
	Send(m *pipes.Message) error
	// Close sends "closed", with exc when the step failed.
	Close(exc *Exception) error
}

// ErrInvalidMessage is wrapped by Session.Send when a message would break
// Dagster's reader and was not written; it is the pipes package's own.
var ErrInvalidMessage = pipes.ErrInvalidMessage

// Exception is the exception object of a "closed" message, shaped as
// Pipes sends it.
type Exception struct {
	// Name is the error's kind, e.g. "RayJobFailed" or "ValueError".
	Name string `json:"name"`
	// Message is the error's text.
	Message string `json:"message"`
	// Stack is the traceback, one entry per frame; never nil.
	Stack []string `json:"stack"`
	// Cause is the exception this one was raised from, if any.
	Cause *Exception `json:"cause"`
	// Context is the exception being handled when this one was raised.
	Context *Exception `json:"context"`
}

// Clock is the runner's source of time: phase durations, deadlines, polls.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d; stop cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// sleep waits d on clock, or until ctx is done.
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	done := make(chan struct{})
	stop := clock.AfterFunc(d, func() { close(done) })
	defer stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
