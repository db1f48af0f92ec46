package kuberay

import (
	"encoding/json"
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// Label and annotation keys raystep puts on every RayJob (and its pods).
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedByRaystep = "raystep"
	LabelName        = "raystep.dev/name"
	LabelOwner       = "raystep.dev/owner"
	LabelKind        = "raystep.dev/kind"
	LabelRunID       = "raystep.dev/dagster-run-id"
	LabelStep        = "raystep.dev/dagster-step"
	LabelRetry       = "raystep.dev/dagster-retry"
	LabelAsset       = "raystep.dev/dagster-asset"

	// LabelQueueName is Kueue's label naming the LocalQueue of a RayJob.
	LabelQueueName = "kueue.x-k8s.io/queue-name"

	AnnotationStepKey  = "raystep.dev/dagster-step-key"
	AnnotationAssetKey = "raystep.dev/dagster-asset-key"
	AnnotationGPUs     = "raystep.dev/gpus"
	// AnnotationJobStatus is the Ray job's final status as the step saw
	// it, set just before teardown (KubeRay's own status may lag behind).
	AnnotationJobStatus = "raystep.dev/job-status"
)

// Build returns the RayJob that runs spec under profile for the resolved
// step (see runner.Resolve): InteractiveMode (raystep submits the entrypoint
// itself), deadlines from spec.timeouts, one head and one worker group per
// spec worker, GPU placement and pod security from the profile,
// raystep's labels and, when the profile turns Ray's token authentication
// on, authOptions naming the token Secret (see AuthSecret). When the
// profile names a Kueue LocalQueue for the spec's workers
// (schemas.Profile.QueueFor), the RayJob carries Kueue's queue-name label
// and is created suspended: Kueue unsuspends it once the queue admits it,
// and KubeRay only then creates the cluster (and starts the clocks of its
// deadlines). The spec and profile describe the cluster; what the
// RayJob is for and where it goes come from step alone: it is named
// step.ID (runner.StepID, so a restarted step finds its RayJob again and
// `render` shows the name `run` uses), placed in step.Namespace and
// labelled with step.RunID, step.Dagster.StepKey, RetryNumber and
// AssetKeys. Build only reads step.
//
// Every policy sets shutdownAfterJobFinishes with ttlSecondsAfterFinished
// from spec.timeouts.ttlAfterFinished: KubeRay rejects a TTL without
// shutdownAfterJobFinishes, and a cluster nobody deletes is the leak
// raystep exists to prevent. What `teardown` changes is what raystep does
// at the end of the step: with never (or on_success after a failure) it
// leaves the RayJob alone, so the cluster stays up for debugging until the
// TTL runs out after the Ray job ended (or after a deadline failed the
// RayJob), then KubeRay deletes the RayCluster and `raystep gc` the RayJob.
func Build(spec *schemas.Spec, profile *schemas.Profile, step runner.Step) (*rayv1.RayJob, error) {
	if spec == nil || profile == nil {
		return nil, fmt.Errorf("build RayJob: spec and profile are required")
	}
	if step.ID == "" {
		return nil, fmt.Errorf("build RayJob %s: the step has no identity (see runner.Resolve)", spec.Metadata.Name)
	}
	s := spec.Spec
	runtimeEnv, err := runtimeEnvYAML(s.RuntimeEnv)
	if err != nil {
		return nil, fmt.Errorf("build RayJob %s: %w", spec.Metadata.Name, err)
	}
	custom, err := entrypointResources(s.EntrypointResources.Resources)
	if err != nil {
		return nil, fmt.Errorf("build RayJob %s: %w", spec.Metadata.Name, err)
	}
	cluster, err := clusterSpec(spec, profile, podLabels(spec), AuthSecretName(step.ID))
	if err != nil {
		return nil, fmt.Errorf("build RayJob %s: %w", spec.Metadata.Name, err)
	}
	job := &rayv1.RayJob{
		TypeMeta: metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        step.ID,
			Namespace:   step.Namespace,
			Labels:      jobLabels(spec, profile, step),
			Annotations: jobAnnotations(spec, step),
		},
		Spec: rayv1.RayJobSpec{
			Entrypoint:                s.Entrypoint,
			RuntimeEnvYAML:            runtimeEnv,
			SubmissionMode:            rayv1.InteractiveMode,
			ShutdownAfterJobFinishes:  true,
			TTLSecondsAfterFinished:   *seconds(s.Timeouts.TTLAfterFinished),
			ActiveDeadlineSeconds:     seconds(s.Timeouts.Run),
			PreRunningDeadlineSeconds: seconds(s.Timeouts.Provision),
			EntrypointNumCpus:         float32(s.EntrypointResources.CPUs),
			EntrypointNumGpus:         float32(s.EntrypointResources.GPUs),
			EntrypointResources:       custom,
			RayClusterSpec:            cluster,
		},
	}
	if q := profile.QueueFor(s.Cluster.Workers); q != "" {
		job.Labels[LabelQueueName] = q
		job.Spec.Suspend = true
	}
	return job, nil
}

// runtimeEnvYAML renders spec.runtimeEnv; working_dir is added at submit time.
func runtimeEnvYAML(env map[string]any) (string, error) {
	if len(env) == 0 {
		return "", nil
	}
	out, err := yaml.Marshal(env)
	if err != nil {
		return "", fmt.Errorf("encode runtimeEnv: %w", err)
	}
	return string(out), nil
}

// entrypointResources renders custom resources as the JSON KubeRay expects.
func entrypointResources(res map[string]float64) (string, error) {
	if len(res) == 0 {
		return "", nil
	}
	out, err := json.Marshal(res)
	if err != nil {
		return "", fmt.Errorf("encode entrypointResources: %w", err)
	}
	return string(out), nil
}

// clusterSpec builds the Ray cluster of spec under profile, whose pods
// carry podLabels: the one description of a raystep cluster, shared by a
// step's RayJob (Build) and an interactive RayCluster (BuildCluster).
// When the profile turns Ray's token authentication on, the cluster reads
// its token from the Secret named secret.
func clusterSpec(spec *schemas.Spec, profile *schemas.Profile, podLabels map[string]string, secret string) (*rayv1.RayClusterSpec, error) {
	c := spec.Spec.Cluster
	cs := &rayv1.RayClusterSpec{
		RayVersion: c.RayVersion,
		HeadGroupSpec: rayv1.HeadGroupSpec{
			RayStartParams: map[string]string{},
			Template: podTemplate(profile, podLabels, container("ray-head", c.Image, profile,
				resources(c.Head.CPUs, c.Head.Memory, "", 0)), nil),
		},
	}
	autoscale := false
	for _, w := range c.Workers {
		g, err := workerGroup(w, c.Image, profile, podLabels)
		if err != nil {
			return nil, err
		}
		cs.WorkerGroupSpecs = append(cs.WorkerGroupSpecs, g)
		autoscale = autoscale || w.Autoscaling()
	}
	if autoscale {
		cs.EnableInTreeAutoscaling = ptr(true)
		cs.AutoscalerOptions = &rayv1.AutoscalerOptions{SecurityContext: containerSecurity(profile)}
	}
	if profile.Spec.RayAuth.On(c.RayVersion) {
		cs.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, SecretName: ptr(secret)}
	}
	if env := secretEnv(c.SecretEnv); len(env) > 0 {
		setEnv(&cs.HeadGroupSpec.Template, env)
		for i := range cs.WorkerGroupSpecs {
			setEnv(&cs.WorkerGroupSpecs[i].Template, env)
		}
	}
	return cs, nil
}

// secretEnv is spec.cluster.secretEnv as container environment: each
// variable a reference to its Secret's key, which the kubelet resolves, so
// neither raystep nor the RayJob ever holds the value.
func secretEnv(entries []schemas.SecretEnv) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, e := range entries {
		env = append(env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: e.Secret}, Key: e.Key},
		}})
	}
	return env
}

// setEnv gives every container of t (the Ray container raystep made) env.
func setEnv(t *corev1.PodTemplateSpec, env []corev1.EnvVar) {
	for i := range t.Spec.Containers {
		t.Spec.Containers[i].Env = append(t.Spec.Containers[i].Env, env...)
	}
}

func workerGroup(w schemas.WorkerGroup, image string, profile *schemas.Profile, labels map[string]string) (rayv1.WorkerGroupSpec, error) {
	var gpu *schemas.GPUType
	if w.GPUType != "" {
		gt, ok := profile.Spec.GPUTypes[w.GPUType]
		if !ok {
			return rayv1.WorkerGroupSpec{}, fmt.Errorf("worker group %s: gpuType %q is not in profile %s", w.Name, w.GPUType, profile.Metadata.Name)
		}
		gpu = &gt
	}
	gpuResource := ""
	if gpu != nil {
		gpuResource = gpu.ResourceName
	}
	ctr := container("ray-worker", image, profile, resources(w.CPUs, w.Memory, gpuResource, w.GPUsPerWorker))
	return rayv1.WorkerGroupSpec{
		GroupName:      w.Name,
		Replicas:       ptr(w.Replicas),
		MinReplicas:    ptr(w.MinReplicas),
		MaxReplicas:    ptr(w.MaxReplicas),
		RayStartParams: map[string]string{},
		Template:       podTemplate(profile, labels, ctr, gpu),
	}, nil
}
