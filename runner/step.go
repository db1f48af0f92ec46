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
// spec into a Step; the runner never reads the spec itself.
type Step struct {
	// Name is the spec's metadata.name.
	Name string
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
	// means no bound.
	ProvisionTimeout time.Duration
	// RunTimeout bounds the job from upload to its end; zero means no bound.
	RunTimeout time.Duration
	// Teardown says when the cluster is deleted.
	Teardown TeardownPolicy
	// GPUType and GPUCount describe the cluster's GPUs for reporting.
	GPUType  string
	GPUCount int
	// Shape describes the cluster for reporting, e.g. "head 2 CPU + 4 gpu".
	Shape string
	// Dagster is the Pipes invocation; zero when standalone.
	Dagster Dagster
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
	// RunID is the Dagster run id; empty when standalone, in which case the
	// runner makes up a unique one (a standalone run never re-attaches).
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
