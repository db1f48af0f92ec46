package kuberay

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/raystep/raystep/schemas"
)

// shmVolume names the shared-memory volume of every Ray pod.
const shmVolume = "dshm"

// podTemplate builds a Ray pod: the profile's service account, security
// context and pull secrets, plus GPU placement when gpu is set.
func podTemplate(profile *schemas.Profile, labels map[string]string, ctr corev1.Container, gpu *schemas.GPUType) corev1.PodTemplateSpec {
	p := profile.Spec
	t := corev1.PodTemplateSpec{}
	t.Labels = maps.Clone(labels)
	// Ray's object store lives in /dev/shm, which container runtimes cap at
	// 64 MiB; a memory-backed volume lets it use the pod's memory instead.
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: shmVolume, MountPath: "/dev/shm"})
	t.Spec = corev1.PodSpec{
		ServiceAccountName: p.ServiceAccount,
		SecurityContext:    podSecurity(p.PodSecurity),
		Containers:         []corev1.Container{ctr},
		Volumes: []corev1.Volume{{
			Name:         shmVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
		}},
	}
	for _, s := range p.Images.PullSecrets {
		t.Spec.ImagePullSecrets = append(t.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if gpu != nil {
		t.Spec.NodeSelector = maps.Clone(gpu.NodeSelector)
		for _, tol := range gpu.Tolerations {
			t.Spec.Tolerations = append(t.Spec.Tolerations, corev1.Toleration{
				Key: tol.Key, Operator: corev1.TolerationOperator(tol.Operator), Value: tol.Value,
				Effect: corev1.TaintEffect(tol.Effect), TolerationSeconds: tol.TolerationSeconds,
			})
		}
	}
	return t
}

func container(name, image string, profile *schemas.Profile, res corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           image,
		ImagePullPolicy: corev1.PullPolicy(profile.Spec.Images.PullPolicy),
		Resources:       res,
		SecurityContext: containerSecurity(profile),
	}
}

// resources sets requests equal to limits so Ray's view of the node matches
// what Kubernetes reserved.
func resources(cpu, memory resource.Quantity, gpuResource string, gpus int32) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}
	if gpuResource != "" && gpus > 0 {
		l[corev1.ResourceName(gpuResource)] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return corev1.ResourceRequirements{Requests: l, Limits: maps.Clone(l)}
}

func podSecurity(s schemas.PodSecurity) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   s.RunAsNonRoot,
		RunAsUser:      s.RunAsUser,
		RunAsGroup:     s.RunAsGroup,
		FSGroup:        s.FSGroup,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileType(s.SeccompProfile)},
	}
}

func containerSecurity(profile *schemas.Profile) *corev1.SecurityContext {
	s := profile.Spec.PodSecurity
	sc := &corev1.SecurityContext{
		RunAsNonRoot:             s.RunAsNonRoot,
		AllowPrivilegeEscalation: s.AllowPrivilegeEscalation,
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileType(s.SeccompProfile)},
	}
	if len(s.DropCapabilities) > 0 {
		sc.Capabilities = &corev1.Capabilities{}
		for _, c := range s.DropCapabilities {
			sc.Capabilities.Drop = append(sc.Capabilities.Drop, corev1.Capability(c))
		}
	}
	return sc
}

// seconds converts a validated duration to Kubernetes' int32 seconds.
func seconds(d time.Duration) *int32 {
	return ptr(int32(d / time.Second))
}

func ptr[T any](v T) *T { return &v }
