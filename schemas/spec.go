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

// Spec is a loaded, validated and defaulted job spec.
type Spec struct {
	// File is the absolute path of the spec file, or StdinName.
	File       string
	APIVersion string
	Kind       string
	Metadata   Metadata
	Spec       JobSpec
}

// Metadata names a step and its owner.
type Metadata struct {
	Name string
	// Namespace is the spec's namespace, or the profile's when the spec has none.
	Namespace   string
	Owner       string
	Labels      map[string]string
	Annotations map[string]string
}

// JobSpec is what to run and on which cluster.
type JobSpec struct {
	Kind       StepKind
	Entrypoint string
	// WorkingDir is absolute (resolved against the spec's directory); empty
	// when the spec has none.
	WorkingDir string
	// RuntimeEnv is Ray's runtime_env as written (JSON-compatible values).
	RuntimeEnv          map[string]any
	EntrypointResources EntrypointResources
	Cluster             Cluster
	Timeouts            Timeouts
	Teardown            Teardown
}

// EntrypointResources are reserved for the driver process.
type EntrypointResources struct {
	CPUs float64
	GPUs float64
	// Memory is zero when unset.
	Memory resource.Quantity
	// Resources are custom Ray resources.
	Resources map[string]float64
}

// Cluster describes the Ray cluster.
type Cluster struct {
	RayVersion string
	Image      string
	Head       Head
	Workers    []WorkerGroup
}

// Head sizes the head pod.
type Head struct {
	CPUs   resource.Quantity
	Memory resource.Quantity
}

// WorkerGroup is one homogeneous group of worker pods.
type WorkerGroup struct {
	Name string
	// Replicas is the starting size; MinReplicas <= Replicas <= MaxReplicas.
	Replicas, MinReplicas, MaxReplicas int32
	// GPUType is a key of the profile's gpuTypes; empty for CPU workers.
	GPUType       string
	GPUsPerWorker int32
	CPUs          resource.Quantity
	Memory        resource.Quantity
}

// Autoscaling reports whether the group may change size.
func (w WorkerGroup) Autoscaling() bool { return w.MinReplicas != w.MaxReplicas }

// Timeouts bound the step.
type Timeouts struct {
	Provision        time.Duration
	Run              time.Duration
	TTLAfterFinished time.Duration
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
			Head       struct {
				CPUs   any `json:"cpus"`
				Memory any `json:"memory"`
			} `json:"head"`
			Workers []rawWorker `json:"workers"`
		} `json:"cluster"`
		Timeouts struct {
			Provision        string `json:"provision"`
			Run              string `json:"run"`
			TTLAfterFinished string `json:"ttlAfterFinished"`
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
