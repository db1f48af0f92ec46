package kuberay

import (
	"encoding/json"
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"sigs.k8s.io/yaml"
)

// Encode prints job as a manifest in format "yaml" or "json", without the
// empty status and creation timestamp that Go's zero values would add, so
// the output can be applied as is.
func Encode(job *rayv1.RayJob, format string) ([]byte, error) {
	raw, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("encode RayJob %s: %w", job.Name, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("encode RayJob %s: %w", job.Name, err)
	}
	delete(doc, "status")
	if meta, ok := doc["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	pruneTemplates(doc)
	switch format {
	case "json":
		out, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode RayJob %s: %w", job.Name, err)
		}
		return append(out, '\n'), nil
	case "yaml", "":
		out, err := yaml.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("encode RayJob %s: %w", job.Name, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown output format %q: want yaml or json", format)
}

// pruneTemplates drops the null creationTimestamp and empty resources that
// pod templates and containers carry as Go zero values.
func pruneTemplates(v any) {
	switch v := v.(type) {
	case map[string]any:
		if ts, ok := v["creationTimestamp"]; ok && ts == nil {
			delete(v, "creationTimestamp")
		}
		if r, ok := v["resources"].(map[string]any); ok && len(r) == 0 {
			delete(v, "resources")
		}
		for _, c := range v {
			pruneTemplates(c)
		}
	case []any:
		for _, c := range v {
			pruneTemplates(c)
		}
	}
}
