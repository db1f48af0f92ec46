package schemas

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// APIVersion is the apiVersion of job specs and profiles.
const APIVersion = "raystep.dev/v1alpha1"

// StepKind says what a step does.
type StepKind string

// The step kinds a spec may name.
const (
	KindTrain          StepKind = "train"
	KindEval           StepKind = "eval"
	KindBatchInference StepKind = "batch_inference"
)

// Teardown says when raystep deletes the cluster.
type Teardown string

// The teardown policies.
const (
	TeardownAlways    Teardown = "always"
	TeardownOnSuccess Teardown = "on_success"
	TeardownNever     Teardown = "never"
)

// Reuse says which steps share a cluster.
type Reuse string

// The reuse policies.
const (
	// ReuseStep gives each step a cluster of its own (the default).
	ReuseStep Reuse = "step"
	// ReuseRun shares one cluster between the steps of one Dagster run
	// whose cluster sections are identical.
	ReuseRun Reuse = "run"
)

// Spec is a loaded, validated and defaulted job spec.
type Spec struct {
	// File is the absolute path of the spec file, or StdinName.
	File string
	// APIVersion is always APIVersion.
	APIVersion string
	// Kind is always "RayStep".
	Kind     string
	Metadata Metadata
	Spec     JobSpec
	// ClusterFile is the run cluster file (RunCluster) Spec.Cluster came
	// from; empty when it is the spec's own.
	ClusterFile string
	// Warnings are problems that leave the spec valid, as validate prints
	// them ("FILE: /pointer: warning: ...").
	Warnings []FieldError
}

// Metadata names a step and its owner.
type Metadata struct {
	// Name is the step's name, a DNS-1035 label of at most 40 characters;
	// Kubernetes objects are named after its first 26 characters.
	Name string
	// Namespace is the spec's namespace, or the profile's when the spec has
	// none; empty with the built-in profile, which leaves it to the
	// kubeconfig (Profile.Namespace).
	Namespace string
	// Owner is the team or person the step belongs to, a valid label
	// value; it becomes the raystep.dev/owner label.
	Owner string
	// Labels and Annotations are added to the step's RayJob; keys under
	// raystep's and Ray's own prefixes are refused by validation.
	Labels      map[string]string
	Annotations map[string]string
}

// JobSpec is what to run and on which cluster.
type JobSpec struct {
	// Kind is the step kind; it becomes the raystep.dev/kind label.
	Kind StepKind
	// Entrypoint is the Ray job's shell command.
	Entrypoint string
	// WorkingDir is absolute (resolved against the spec's directory); empty
	// when the spec has none.
	WorkingDir string
	// RuntimeEnv is Ray's runtime_env as written (JSON-compatible values).
	RuntimeEnv map[string]any
	// EntrypointResources are reserved for the driver process.
	EntrypointResources EntrypointResources
	Cluster             Cluster
	Timeouts            Timeouts
	// Teardown says when the cluster is deleted; TeardownAlways when the
	// spec names none.
	Teardown Teardown
}

// EntrypointResources are reserved for the driver process.
type EntrypointResources struct {
	// CPUs and GPUs are logical Ray CPUs and GPUs; 0 reserves none.
	CPUs float64
	GPUs float64
	// Memory is zero when unset.
	Memory resource.Quantity
	// Resources are custom Ray resources.
	Resources map[string]float64
}

// Cluster describes the Ray cluster.
type Cluster struct {
	// RayVersion is a "2.60.0"-style version that agrees with a version in
	// Image's tag.
	RayVersion string
	// Image is the container image of every Ray pod, one the profile's
	// ImagePolicy allows.
	Image   string
	Head    Head
	Workers []WorkerGroup
	// Reuse is ReuseStep unless the spec asks for ReuseRun.
	Reuse Reuse
	// SecretEnv are the environment variables of every Ray container
	// whose values come from Secrets. Omitted from JSON when empty, so a
	// section without it hashes as before it existed (runner.ClusterHash).
	SecretEnv []SecretEnv `json:",omitempty"`
}

// SecretEnv is an environment variable of the driver and the workers whose
// value is a secret: on KubeRay the key Key of the Secret named Secret in
// the step's namespace, referenced by the pods so that raystep never holds
// the value; on the local backend raystep's own variable Name.
type SecretEnv struct {
	Name, Secret, Key string
}

// Head sizes the head pod.
type Head struct {
	// CPUs and Memory are the head container's requests and limits
	// (equal); 2 and 4Gi when the spec names none.
	CPUs   resource.Quantity
	Memory resource.Quantity
}

// WorkerGroup is one homogeneous group of worker pods.
type WorkerGroup struct {
	// Name is a DNS-1035 label of at most 15 characters, unique within
	// the cluster.
	Name string
	// Replicas is the starting size; MinReplicas <= Replicas <= MaxReplicas.
	Replicas, MinReplicas, MaxReplicas int32
	// GPUType is a key of the profile's gpuTypes; empty for CPU workers.
	GPUType string
	// GPUsPerWorker is the GPUs of each worker: 1 with a GPUType unless
	// the spec says otherwise, else 0.
	GPUsPerWorker int32
	// CPUs and Memory are each worker container's requests and limits
	// (equal).
	CPUs   resource.Quantity
	Memory resource.Quantity
}

// Autoscaling reports whether the group may change size.
func (w WorkerGroup) Autoscaling() bool { return w.MinReplicas != w.MaxReplicas }

// Timeouts bound the step.
type Timeouts struct {
	// Provision is the longest wait before the job runs (the RayJob's
	// preRunningDeadlineSeconds); 15m by default.
	Provision time.Duration
	// Run is the longest life of the whole RayJob (activeDeadlineSeconds);
	// 24h by default.
	Run time.Duration
	// TTLAfterFinished is how long KubeRay keeps a finished cluster
	// (ttlSecondsAfterFinished); 10m by default.
	TTLAfterFinished time.Duration
	// Queue, when set, is the longest wait in a Kueue queue, and Provision
	// counts from admission; zero means Provision covers the queue too.
	Queue time.Duration
}

// rawSpec mirrors the schema for decoding a validated tree.
type rawSpec struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Owner       string            `json:"owner"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Kind                string         `json:"kind"`
		Entrypoint          string         `json:"entrypoint"`
		WorkingDir          string         `json:"workingDir"`
		RuntimeEnv          map[string]any `json:"runtimeEnv"`
		EntrypointResources struct {
			CPUs      float64            `json:"cpus"`
			GPUs      float64            `json:"gpus"`
			Memory    any                `json:"memory"`
			Resources map[string]float64 `json:"resources"`
		} `json:"entrypointResources"`
		Cluster struct {
			RayVersion string `json:"rayVersion"`
			Image      string `json:"image"`
			Reuse      string `json:"reuse"`
			Head       struct {
				CPUs   any `json:"cpus"`
				Memory any `json:"memory"`
			} `json:"head"`
			Workers   []rawWorker `json:"workers"`
			SecretEnv []struct {
				Name   string `json:"name"`
				Secret string `json:"secret"`
				Key    string `json:"key"`
			} `json:"secretEnv"`
		} `json:"cluster"`
		Timeouts struct {
			Provision        string `json:"provision"`
			Run              string `json:"run"`
			TTLAfterFinished string `json:"ttlAfterFinished"`
			Queue            string `json:"queue"`
		} `json:"timeouts"`
		Teardown string `json:"teardown"`
	} `json:"spec"`
}

type rawWorker struct {
	Name          string `json:"name"`
	Replicas      *int32 `json:"replicas"`
	MinReplicas   *int32 `json:"minReplicas"`
	MaxReplicas   *int32 `json:"maxReplicas"`
	GPUType       string `json:"gpuType"`
	GPUsPerWorker *int32 `json:"gpusPerWorker"`
	CPUs          any    `json:"cpus"`
	Memory        any    `json:"memory"`
}
