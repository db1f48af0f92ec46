package kuberay

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// podLabels are the labels every Ray pod carries, so `kubectl get pods -l`
// finds a step's pods.
func podLabels(spec *schemas.Spec) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByRaystep,
		LabelName:      spec.Metadata.Name,
		LabelOwner:     spec.Metadata.Owner,
		LabelKind:      string(spec.Spec.Kind),
	}
}

// jobLabels layers the profile's labels, the spec's labels and raystep's
// own (which win).
func jobLabels(spec *schemas.Spec, profile *schemas.Profile, step runner.Step) map[string]string {
	l := map[string]string{}
	maps.Copy(l, profile.Spec.Labels)
	maps.Copy(l, spec.Metadata.Labels)
	maps.Copy(l, podLabels(spec))
	if step.RunID != "" {
		l[LabelRunID] = LabelValue(step.RunID)
		l[LabelRetry] = strconv.Itoa(step.Dagster.RetryNumber)
	}
	if step.Dagster.StepKey != "" {
		l[LabelStep] = LabelValue(step.Dagster.StepKey)
	}
	if asset := assetKey(step); asset != "" {
		l[LabelAsset] = LabelValue(asset)
	}
	return l
}

// assetKey is the step's asset keys as one label source: Dagster's
// slash-joined keys, joined with ",".
func assetKey(step runner.Step) string { return strings.Join(step.Dagster.AssetKeys, ",") }

// jobAnnotations keeps the exact Dagster identifiers that labels may shorten,
// and the GPU count `raystep ls` shows.
func jobAnnotations(spec *schemas.Spec, step runner.Step) map[string]string {
	a := maps.Clone(spec.Metadata.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	if step.Dagster.StepKey != "" {
		a[AnnotationStepKey] = step.Dagster.StepKey
	}
	if asset := assetKey(step); asset != "" {
		a[AnnotationAssetKey] = asset
	}
	if g := gpuSummary(spec); g != "" {
		a[AnnotationGPUs] = g
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// gpuSummary describes GPU demand as "type=count,..." at the maximum size.
func gpuSummary(spec *schemas.Spec) string {
	var parts []string
	for _, w := range spec.Spec.Cluster.Workers {
		if w.GPUType != "" && w.GPUsPerWorker > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", w.GPUType, w.GPUsPerWorker*w.MaxReplicas))
		}
	}
	return strings.Join(parts, ",")
}

// LabelValue turns s into a valid Kubernetes label value: characters outside
// [A-Za-z0-9._-] become '-', and a value longer than 63 characters keeps
// its first 54 plus '-' and 8 hex characters of its hash, so distinct inputs
// stay distinct.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	v := string(b)
	if len(v) > 63 {
		sum := sha256.Sum256([]byte(s))
		v = strings.TrimRight(v[:54], "-_.") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return strings.Trim(v, "-_.")
}
