package schemas

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

const exampleRunCluster = "../examples/ads_ranking/run_cluster.yaml"

// reuseRun is the override the Dagster resource's cluster_reuse="run" passes.
var reuseRun = []string{"spec.cluster.reuse=run"}

func TestRunClusterReplacesEachRunScopedStepsCluster(t *testing.T) {
	t.Parallel()
	platform := exampleProfiles(t)["platform"]
	rc, err := LoadRunCluster(context.Background(), exampleRunCluster)
	if err != nil {
		t.Fatalf("LoadRunCluster(%s) = %v", exampleRunCluster, err)
	}
	var clusters []Cluster
	for _, name := range []string{"train", "eval", "batch_inference"} {
		file := "../examples/ads_ranking/" + name + ".yaml"
		own, err := Load(file, LoadOptions{Profile: platform, RunCluster: rc})
		if err != nil {
			t.Fatalf("Load(%s) with reuse step = %v", file, err)
		}
		plain, err := Load(file, LoadOptions{Profile: platform})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(plain.Spec.Cluster, own.Spec.Cluster); diff != "" || own.ClusterFile != "" {
			t.Errorf("%s with reuse step: the run cluster replaced the spec's own (ClusterFile %q, -want +got):\n%s", name, own.ClusterFile, diff)
		}
		shared, err := Load(file, LoadOptions{Profile: platform, RunCluster: rc, Set: reuseRun})
		if err != nil {
			t.Fatalf("Load(%s) with reuse run = %v", file, err)
		}
		if shared.ClusterFile != exampleRunCluster || shared.Spec.Cluster.Reuse != ReuseRun {
			t.Errorf("%s: ClusterFile %q reuse %q, want %q and run", name, shared.ClusterFile, shared.Spec.Cluster.Reuse, exampleRunCluster)
		}
		clusters = append(clusters, shared.Spec.Cluster)
	}
	for i, c := range clusters[1:] {
		if diff := cmp.Diff(clusters[0], c); diff != "" {
			t.Errorf("step %d's cluster differs from the first's (-first +got):\n%s", i+1, diff)
		}
	}
	if got := len(clusters[0].Workers); got != 2 {
		t.Errorf("run cluster has %d worker groups, want the file's 2", got)
	}
}

func TestRunClusterOverridesApplyToIt(t *testing.T) {
	t.Parallel()
	rc, err := LoadRunCluster(context.Background(), exampleRunCluster)
	if err != nil {
		t.Fatal(err)
	}
	opts := LoadOptions{Profile: exampleProfiles(t)["platform"], RunCluster: rc,
		Set: append([]string{"spec.cluster.workers.1.maxReplicas=2"}, reuseRun...)}
	s, err := Load("../examples/ads_ranking/eval.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Spec.Cluster.Workers[1].MaxReplicas; got != 2 {
		t.Errorf("workers[1].maxReplicas = %d, want the override's 2", got)
	}
	again, err := Load("../examples/ads_ranking/eval.yaml", LoadOptions{Profile: opts.Profile, RunCluster: rc, Set: reuseRun})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Spec.Cluster.Workers[1].MaxReplicas; got != 4 {
		t.Errorf("after an override of another spec, workers[1].maxReplicas = %d, want the file's 4", got)
	}
}

func TestRunClusterErrorsNameItsFileAndField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		set        []string // on eval.yaml, besides reuse run
		want       []string // error lines; RC is the run cluster file, SPEC eval.yaml
	}{
		{name: "not a map", file: "- a\n", want: []string{`RC: expected a map with one key, cluster: `}},
		{name: "unknown top-level key", file: "cluster: {rayVersion: \"2.60.0\", image: rayproject/ray:2.60.0}\nworkers: []\n",
			want: []string{`RC: /workers: unknown key "workers": a run cluster file holds one key, cluster`}},
		{name: "no cluster", file: "{}\n", want: []string{`RC: required key "cluster" is missing`}},
		{name: "cluster not a map", file: "cluster: [a]\n", want: []string{`RC: /cluster: expected a map, got a list`}},
		{name: "reuse in the file", file: "cluster: {rayVersion: \"2.60.0\", image: rayproject/ray:2.60.0, reuse: run}\n",
			want: []string{`RC: /cluster/reuse: not allowed in a run cluster file`}},
		{name: "unknown gpuType", file: "cluster:\n  rayVersion: \"2.60.0\"\n  image: rayproject/ray:2.60.0\n  workers:\n" +
			"    - {name: g, gpuType: b200, cpus: 4, memory: 8Gi}\n",
			want: []string{`RC: /cluster/workers/0/gpuType: unknown gpuType "b200": profile ml-platform has a100-80gb, l4`}},
		{name: "missing image and unknown key", file: "cluster:\n  rayVersion: \"2.60.0\"\n  heed: {cpus: 2}\n",
			want: []string{`RC: /cluster/image: required key "image" is missing`, `RC: /cluster/heed: unknown key "heed" (did you mean "head"?)`}},
		{name: "image not allowed", file: "cluster: {rayVersion: \"2.60.0\", image: docker.io/me/ray:2.60.0}\n",
			want: []string{`RC: /cluster/image: image "docker.io/me/ray:2.60.0" is not allowed by profile ml-platform`}},
		{name: "driver GPUs on a cluster without GPUs", file: "cluster: {rayVersion: \"2.60.0\", image: rayproject/ray:2.60.0}\n",
			set:  []string{"spec.entrypointResources.gpus=1"},
			want: []string{`--set spec.entrypointResources.gpus=1: /spec/entrypointResources/gpus: asks for 1 GPUs but no worker group has GPUs`}},
		{name: "accelerator type the cluster lacks", file: l4Cluster,
			set: []string{"spec.entrypointResources.gpus=1", "spec.entrypointResources.resources={\"accelerator_type:A100\": 0.01}"},
			want: []string{`SPEC: /spec/entrypointResources: ` +
				`the driver needs 1 CPUs, 1 GPUs, 0.01 accelerator_type:A100 on one node, and no node of the run's cluster (RC) has that: ` +
				`head 2 CPUs 4Gi; workers l4 4 CPUs 16Gi 1 l4 GPUs`}},
		{name: "more memory than a node lends", file: l4Cluster, set: []string{"spec.entrypointResources.memory=12Gi"},
			want: []string{`SPEC: /spec/entrypointResources: the driver needs 1 CPUs, 12Gi of memory on one node`}},
		{name: "more CPUs than any node", file: l4Cluster, set: []string{"spec.entrypointResources.cpus=6"},
			want: []string{`SPEC: /spec/entrypointResources: the driver needs 6 CPUs on one node`}},
		{name: "a custom resource", file: l4Cluster, set: []string{"spec.entrypointResources.resources={tpu: 1}"},
			want: []string{`SPEC: /spec/entrypointResources: the driver needs 1 CPUs, 1 tpu on one node`}},
	}
	platform := exampleProfiles(t)["platform"]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "run_cluster.yaml")
			if err := os.WriteFile(file, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			rc, err := LoadRunCluster(context.Background(), file)
			if err == nil {
				_, err = Load("../examples/ads_ranking/eval.yaml", LoadOptions{Profile: platform, RunCluster: rc, Set: append(tt.set, reuseRun...)})
			}
			var ve *ValidationErrors
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want *ValidationErrors", err)
			}
			if len(ve.Errors) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(ve.Errors), len(tt.want), err)
			}
			for i, w := range tt.want {
				w = strings.ReplaceAll(strings.ReplaceAll(w, "RC", file), "SPEC", "../examples/ads_ranking/eval.yaml")
				if got := ve.Errors[i].Error(); !strings.Contains(got, w) {
					t.Errorf("error %d = %q, want it to contain %q", i, got, w)
				}
			}
		})
	}
}

// l4Cluster is a run cluster of a default head and one group of one L4 worker.
const l4Cluster = "cluster:\n  rayVersion: \"2.60.0\"\n  image: rayproject/ray:2.60.0\n  workers:\n" +
	"    - {name: l4, gpuType: l4, cpus: 4, memory: 16Gi}\n"

func TestDriverFits(t *testing.T) {
	t.Parallel()
	c := Cluster{
		Head: Head{CPUs: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
		Workers: []WorkerGroup{
			{Name: "a100", MaxReplicas: 2, GPUType: "a100-80gb", GPUsPerWorker: 1, CPUs: resource.MustParse("8"), Memory: resource.MustParse("32Gi")},
			{Name: "spare", MaxReplicas: 0, GPUType: "l4", GPUsPerWorker: 4, CPUs: resource.MustParse("32"), Memory: resource.MustParse("128Gi")},
		},
	}
	tests := []struct {
		name string
		r    EntrypointResources
		want bool
	}{
		{name: "nothing", want: true},
		{name: "head CPUs", r: EntrypointResources{CPUs: 2}, want: true},
		{name: "worker CPUs", r: EntrypointResources{CPUs: 8}, want: true},
		{name: "too many CPUs", r: EntrypointResources{CPUs: 9}},
		{name: "one GPU", r: EntrypointResources{GPUs: 1}, want: true},
		{name: "a fraction of a GPU", r: EntrypointResources{GPUs: 0.5}, want: true},
		{name: "two GPUs on one node", r: EntrypointResources{GPUs: 2}},
		{name: "Ray's A100 name", r: EntrypointResources{GPUs: 1, Resources: map[string]float64{"accelerator_type:A100": 0.01}}, want: true},
		{name: "Ray's A100-80G name", r: EntrypointResources{Resources: map[string]float64{"accelerator_type:A100-80G": 0.01}}, want: true},
		{name: "a type no group has", r: EntrypointResources{Resources: map[string]float64{"accelerator_type:H100": 1}}},
		{name: "a group that never has a worker", r: EntrypointResources{Resources: map[string]float64{"accelerator_type:L4": 1}}},
		{name: "memory Ray lends", r: EntrypointResources{Memory: resource.MustParse("22Gi")}, want: true},
		{name: "memory of the object store", r: EntrypointResources{Memory: resource.MustParse("23Gi")}},
		{name: "a custom resource", r: EntrypointResources{Resources: map[string]float64{"tpu": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := false
			for _, n := range nodes(c) {
				got = got || n.fits(tt.r)
			}
			if got != tt.want {
				t.Errorf("fits %+v = %v, want %v", tt.r, got, tt.want)
			}
		})
	}
}
