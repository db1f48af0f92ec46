package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Step is what the runner runs: the validated job spec reduced to what the
// lifecycle needs, plus the Dagster invocation. The caller converts the
// spec into a Step and resolves it once (see Resolve) before any backend
// exists; from then on the runner and the backends only read it, and a
// backend is handed a copy. The runner never reads the spec itself.
type Step struct {
	// ID is the step attempt's identity (see StepID): the Ray submission id,
	// and the name of its cluster where the backend names one (a RayJob).
	// Resolve sets it; a Step with an ID is resolved.
	ID string
	// RunID is the run the step belongs to: Dagster's run id, or the one
	// Resolve made up for a standalone step (which never re-attaches).
	RunID string
	// Namespace is the Kubernetes namespace of the step's cluster; empty on
	// backends without namespaces (local). The caller resolves it.
	Namespace string
	// Name is the spec's metadata.name.
	Name string
	// Owner is the spec's metadata.owner; empty when it names none.
	Owner string
	// Kind is the spec's kind: train, eval or batch_inference.
	Kind string
	// Entrypoint is the shell command the Ray driver runs.
	Entrypoint string
	// WorkingDir is a local directory uploaded as the job's working_dir;
	// empty for none.
	WorkingDir string
	// Excludes are gitignore patterns (relative to WorkingDir) of paths
	// left out of its package: the runtime_env's excludes.
	Excludes []string
	// RuntimeEnv is the spec's runtime_env (pip, env_vars, ...). The runner
	// copies it; it never changes the caller's map.
	RuntimeEnv map[string]any
	// Resources reserve capacity for the driver.
	Resources Resources
	// ProvisionTimeout bounds provisioning and reaching the dashboard; zero
	// means no bound. It covers a wait in a queue too unless QueueTimeout
	// is set.
	ProvisionTimeout time.Duration
	// QueueTimeout, when set, bounds the wait in a queue (see Queued), and
	// ProvisionTimeout counts from admission.
	QueueTimeout time.Duration
	// RunTimeout bounds the job from upload to its end; zero means no bound.
	RunTimeout time.Duration
	// Teardown says when the cluster is deleted: the spec's policy, or the
	// one the caller's resolution forces on its backend.
	Teardown TeardownPolicy
	// GPUType and GPUCount describe the cluster's GPUs for reporting.
	GPUType  string
	GPUCount int
	// Shape describes the cluster for reporting, e.g. "head 2 CPU + 4 gpu",
	// or the machine's cluster on the local backend.
	Shape string
	// Dagster is the Pipes invocation; zero when standalone.
	Dagster Dagster
	// HistoryURL is the page of the step's history in raystep ui, linked
	// from its Dagster metadata (raystep/history_url); empty for none.
	HistoryURL string
	// Notices are choices made for the user while the step was resolved
	// (a teardown policy that does not apply, say); the runner tells them
	// as warnings when the step starts.
	Notices []string
}

// Resources reserve capacity for the Ray driver.
type Resources struct {
	// CPUs and GPUs are entrypoint_num_cpus and entrypoint_num_gpus.
	CPUs, GPUs float64
	// Memory is entrypoint_memory, in bytes.
	Memory int64
	// Custom is entrypoint_resources.
	Custom map[string]float64
}

// Dagster identifies the Dagster step that runs raystep.
type Dagster struct {
	// RunID is the Dagster run id; empty when standalone, in which case
	// Resolve makes up a unique one as Step.RunID (a standalone run never
	// re-attaches).
	RunID string
	// StepKey tells steps of one run apart; empty means the asset keys
	// joined with ",".
	StepKey string
	// RetryNumber is the step's retry number: a retry is a new attempt with
	// a fresh cluster and job.
	RetryNumber int
	// AssetKeys are the step's asset keys as Pipes sends them (parts joined
	// with "/").
	AssetKeys []string
	// Context is the Pipes context payload exactly as received; it is passed
	// to the driver unchanged. Nil when standalone: the runner then gives
	// the driver a context of its own whose asset key is the step's name.
	Context json.RawMessage
}

// Key returns what tells the run's steps apart: StepKey, or the asset keys
// joined with "," when it is empty.
func (d Dagster) Key() string {
	if d.StepKey != "" {
		return d.StepKey
	}
	return strings.Join(d.AssetKeys, ",")
}

// TeardownPolicy says when the cluster is deleted. Whatever the policy, a
// Ray job still running at teardown is stopped.
type TeardownPolicy string

// The teardown policies of the spec.
const (
	// TeardownAlways deletes the cluster on every path (the default).
	TeardownAlways TeardownPolicy = "always"
	// TeardownOnSuccess keeps the cluster for debugging when the job or
	// the infrastructure failed; a cancelled step is still torn down.
	TeardownOnSuccess TeardownPolicy = "on_success"
	// TeardownNever keeps the cluster (its TTL still applies).
	TeardownNever TeardownPolicy = "never"
)

// keep reports whether the cluster stays up after a step that ended with err.
func (p TeardownPolicy) keep(err error) bool {
	switch p {
	case TeardownNever:
		return true
	case TeardownOnSuccess:
		return err != nil && !errors.Is(err, ErrCancelled)
	default:
		return false
	}
}

// Phase names a part of the step's lifecycle.
type Phase string

// The phases, in order.
const (
	PhaseProvision Phase = "provision"
	PhaseDashboard Phase = "dashboard"
	PhaseUpload    Phase = "upload"
	PhaseSubmit    Phase = "submit"
	PhaseRun       Phase = "run"
	PhaseTeardown  Phase = "teardown"
	PhaseReport    Phase = "report"
)

// Resolve returns step with the identity of its attempt filled in: RunID
// (Dagster's run id, else one from newRunID, random when nil), the asset
// keys of a step with neither asset keys nor a Pipes context (its name),
// the step key (Dagster.Key()) and ID, StepID of them. It is the one place
// a step's identity is computed: the caller resolves before it builds the
// backend, and Run resolves only a step that comes without an ID. A step
// whose ID is set is returned unchanged.
func Resolve(step Step, newRunID func() string) Step {
	if step.ID != "" {
		return step
	}
	if step.RunID == "" {
		step.RunID = step.Dagster.RunID
	}
	if step.RunID == "" {
		if newRunID == nil {
			newRunID = randomRunID
		}
		step.RunID = newRunID()
	}
	if len(step.Dagster.AssetKeys) == 0 && step.Dagster.Context == nil {
		step.Dagster.AssetKeys = []string{step.Name}
	}
	step.Dagster.StepKey = step.Dagster.Key()
	step.ID = StepID(step.Name, step.RunID, step.Dagster.StepKey, step.Dagster.RetryNumber)
	return step
}

// maxNameInID keeps StepID within KubeRay's 47-character RayJob names:
// "raystep-" + name + "-" + 12 hex digits.
const maxNameInID = 47 - len("raystep-") - 1 - 12

// StepID returns the deterministic identity of one attempt of a step:
// "raystep-<name>-<hash>", where hash covers the Dagster run id, step key,
// retry number and spec name. The same attempt always gets the same id, so a
// restarted raystep finds its cluster and job instead of creating twins. The
// result is a DNS-1035 label of at most 47 characters.
func StepID(name, runID, stepKey string, retry int) string {
	h := sha256.New()
	for _, part := range []string{runID, stepKey, strconv.Itoa(retry), name} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	sum := hex.EncodeToString(h.Sum(nil))[:12]
	return "raystep-" + idName(name) + "-" + sum
}

// idName reduces name to lower-case letters, digits and single dashes.
func idName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	s := b.String()
	if len(s) > maxNameInID {
		s = s[:maxNameInID]
	}
	s = strings.Trim(s, "-")
	if s == "" {
		return "step"
	}
	return s
}
