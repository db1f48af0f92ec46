package kuberay

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden manifests in testdata")

// identity is a Dagster step attempt used by the golden files.
var identity = runner.Dagster{
	RunID:       "3f2a9c1b-7d0e-4c55-9a51-0e2f6b8f4c11",
	StepKey:     "ads_ranking_model",
	RetryNumber: 1,
	AssetKeys:   []string{"ads/ranking_model"},
}

// attempt is the resolved step of spec for the Dagster attempt d, in the
// spec's namespace.
func attempt(spec *schemas.Spec, d runner.Dagster) runner.Step {
	return runner.Resolve(runner.Step{Name: spec.Metadata.Name, Namespace: spec.Metadata.Namespace, Dagster: d}, nil)
}

// anonymous is a step of spec outside Dagster, with nothing made up: the
// RayJob carries no Dagster labels.
func anonymous(spec *schemas.Spec) runner.Step {
	return runner.Step{ID: runner.StepID(spec.Metadata.Name, "", "", 0), Namespace: spec.Metadata.Namespace}
}

func load(t *testing.T, file string) (*schemas.Spec, *schemas.Profile) {
	t.Helper()
	profile, err := schemas.LoadProfile("../../examples/platform.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := schemas.Load(file, schemas.LoadOptions{Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	return spec, profile
}

func examples(t *testing.T) []string {
	all, err := filepath.Glob("../../examples/ads_ranking/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range all {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "\nkind: RayStep\n") {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	return files
}

func TestBuildGolden(t *testing.T) {
	t.Parallel()
	for _, file := range examples(t) {
		for _, format := range []string{"yaml", "json"} {
			name := strings.TrimSuffix(filepath.Base(file), ".yaml")
			t.Run(name+"."+format, func(t *testing.T) {
				t.Parallel()
				spec, profile := load(t, file)
				job, err := Build(spec, profile, attempt(spec, identity))
				if err != nil {
					t.Fatal(err)
				}
				got, err := EncodeWithSecret(job, format)
				if err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata", name+".rayjob."+format)
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("read golden (run go test -update): %v", err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", golden, diff)
				}
			})
		}
	}
}

// TestRenderedManifestsDecodeStrictly reads every golden manifest back into
// KubeRay's RayJob type, and the token Secret that follows it into a
// Secret, failing on any field either does not know, and runs the
// operator's own validation on the RayJob.
func TestRenderedManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	goldens, err := filepath.Glob("testdata/*.rayjob.*")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden manifests: %v", err)
	}
	for _, golden := range goldens {
		t.Run(filepath.Base(golden), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(golden, ".yaml") {
				var docs []byte
				for doc := range strings.SplitSeq(string(data), "\n---\n") {
					j, err := yaml.YAMLToJSON([]byte(doc))
					if err != nil {
						t.Fatal(err)
					}
					docs = append(docs, j...)
				}
				data = docs
			}
			var job rayv1.RayJob
			var secret corev1.Secret
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&job); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			checkOperatorRules(t, &job)
			if err := dec.Decode(&secret); err != nil {
				t.Fatalf("strict decode of the token Secret after the RayJob: %v", err)
			}
			if a := job.Spec.RayClusterSpec.AuthOptions; a == nil || a.SecretName == nil || *a.SecretName != secret.Name {
				t.Errorf("authOptions %+v, want it to name the Secret %s", a, secret.Name)
			}
			if dec.More() {
				t.Errorf("more than a RayJob and its Secret")
			}
		})
	}
}

// checkOperatorRules applies what KubeRay v1.6.0 and Kubernetes check.
func checkOperatorRules(t *testing.T, job *rayv1.RayJob) {
	t.Helper()
	if job.APIVersion != "ray.io/v1" || job.Kind != "RayJob" {
		t.Errorf("type = %s %s, want ray.io/v1 RayJob", job.APIVersion, job.Kind)
	}
	if err := rayutils.ValidateRayJobMetadata(job.ObjectMeta); err != nil {
		t.Errorf("ValidateRayJobMetadata: %v", err)
	}
	if err := rayutils.ValidateRayJobSpec(job); err != nil {
		t.Errorf("ValidateRayJobSpec: %v", err)
	}
	for k, v := range job.Labels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			t.Errorf("label %s=%s: %v", k, v, errs)
		}
	}
	// The longest names KubeRay derives: cluster "<job>-xxxxx" and its
	// "-head-svc" service must stay DNS labels.
	cluster := job.Name + "-xxxxx"
	for _, n := range []string{cluster, cluster + "-head-svc", cluster + "-serve-svc"} {
		if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
			t.Errorf("derived name %s: %v", n, errs)
		}
	}
}

func TestBuildShape(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/batch_inference.yaml")
	job, err := Build(spec, profile, anonymous(spec))
	if err != nil {
		t.Fatal(err)
	}
	w := job.Spec.RayClusterSpec.WorkerGroupSpecs[0]
	ctr := w.Template.Spec.Containers[0]
	got := map[string]any{
		"mode":        string(job.Spec.SubmissionMode),
		"backoff":     job.Spec.BackoffLimit == nil,
		"shutdown":    job.Spec.ShutdownAfterJobFinishes,
		"ttl":         job.Spec.TTLSecondsAfterFinished,
		"provision":   *job.Spec.PreRunningDeadlineSeconds,
		"run":         *job.Spec.ActiveDeadlineSeconds,
		"autoscaling": *job.Spec.RayClusterSpec.EnableInTreeAutoscaling,
		"replicas":    []int32{*w.MinReplicas, *w.Replicas, *w.MaxReplicas},
		"gpuLimit":    ctr.Resources.Limits.Name("nvidia.com/gpu", "").String(),
		"gpuRequest":  ctr.Resources.Requests.Name("nvidia.com/gpu", "").String(),
		"selector":    w.Template.Spec.NodeSelector["cloud.google.com/gke-accelerator"],
		"toleration":  w.Template.Spec.Tolerations[0].Key,
		"managedBy":   job.Labels[LabelManagedBy],
		"kind":        job.Labels[LabelKind],
	}
	want := map[string]any{
		"mode": "InteractiveMode", "backoff": true, "shutdown": true, "ttl": int32(600),
		"provision": int32(900), "run": int32(10800), "autoscaling": true,
		"replicas": []int32{1, 1, 4}, "gpuLimit": "1", "gpuRequest": "1",
		"selector": "nvidia-l4", "toleration": "nvidia.com/gpu",
		"managedBy": "raystep", "kind": "batch_inference",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RayJob (-want +got):\n%s", diff)
	}
}

func TestNameIsDeterministic(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/train.yaml")
	name := func(d runner.Dagster) string {
		job, err := Build(spec, profile, attempt(spec, d))
		if err != nil {
			t.Fatal(err)
		}
		return job.Name
	}
	a, b := name(identity), name(identity)
	retry := identity
	retry.RetryNumber++
	c := name(retry)
	if a != b || a == c || len(a) > 47 {
		t.Errorf("names %q %q %q: want equal, then different, at most 47 characters", a, b, c)
	}
}

// TestEveryPolicyKeepsTheTTL: teardown decides what raystep deletes at the
// end of a step, never whether KubeRay's TTL applies, so a kept cluster
// still goes away on its own.
func TestEveryPolicyKeepsTheTTL(t *testing.T) {
	t.Parallel()
	profile, err := schemas.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"always", "on_success", "never"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			spec, err := schemas.Load("../../examples/ads_ranking/eval.yaml", schemas.LoadOptions{Profile: profile,
				Set: []string{"spec.teardown=" + policy, "spec.timeouts.ttlAfterFinished=15m"}})
			if err != nil {
				t.Fatal(err)
			}
			job, err := Build(spec, profile, anonymous(spec))
			if err != nil {
				t.Fatal(err)
			}
			got := []any{job.Spec.ShutdownAfterJobFinishes, job.Spec.TTLSecondsAfterFinished}
			if diff := cmp.Diff([]any{true, int32(900)}, got); diff != "" {
				t.Errorf("shutdownAfterJobFinishes, ttlSecondsAfterFinished (-want +got):\n%s", diff)
			}
			checkOperatorRules(t, job)
		})
	}
}

func TestLabelValue(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ab/", 30)
	tests := []struct{ in, want string }{
		{"ads/ranking_model", "ads-ranking_model"},
		{"/x/", "x"},
		{long, "ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-a-7ff2b8b5"},
	}
	for _, tt := range tests {
		got := LabelValue(tt.in)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q, invalid: %v", tt.in, got, errs)
		}
		if tt.in != long && got != tt.want {
			t.Errorf("LabelValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBuildSecretEnv: spec.cluster.secretEnv becomes a reference to the
// Secret's key on the Ray container of the head and of every worker
// group, and nowhere else: not in the job's runtime_env, which the
// dashboard shows.
func TestBuildSecretEnv(t *testing.T) {
	t.Parallel()
	spec, profile := load(t, "../../examples/ads_ranking/batch_inference.yaml")
	spec.Spec.Cluster.SecretEnv = []schemas.SecretEnv{
		{Name: "WANDB_API_KEY", Secret: "wandb", Key: "api-key"},
		{Name: "HF_TOKEN", Secret: "hf", Key: "token"},
	}
	job, err := Build(spec, profile, anonymous(spec))
	if err != nil {
		t.Fatal(err)
	}
	ref := func(secret, key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}
	}
	want := []corev1.EnvVar{{Name: "WANDB_API_KEY", ValueFrom: ref("wandb", "api-key")}, {Name: "HF_TOKEN", ValueFrom: ref("hf", "token")}}
	cs := job.Spec.RayClusterSpec
	templates := map[string]corev1.PodTemplateSpec{"head": cs.HeadGroupSpec.Template}
	for _, g := range cs.WorkerGroupSpecs {
		templates["worker group "+g.GroupName] = g.Template
	}
	for name, tpl := range templates {
		for _, c := range tpl.Spec.Containers {
			if diff := cmp.Diff(want, c.Env); diff != "" {
				t.Errorf("%s container %s env (-want +got):\n%s", name, c.Name, diff)
			}
		}
	}
	if strings.Contains(job.Spec.RuntimeEnvYAML, "WANDB_API_KEY") {
		t.Errorf("runtime_env names the secret variable:\n%s", job.Spec.RuntimeEnvYAML)
	}
	plain, err := Build(func() *schemas.Spec { s := *spec; s.Spec.Cluster.SecretEnv = nil; return &s }(), profile, anonymous(spec))
	if err != nil {
		t.Fatal(err)
	}
	if env := plain.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Env; env != nil {
		t.Errorf("without secretEnv the head's env = %v, want none", env)
	}
}
