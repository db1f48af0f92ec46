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
	return encode(job, "RayJob "+job.Name, format)
}

// EncodeWithSecret prints job as Encode does and, when job has a token
// Secret (AuthSecret), that Secret after it without its token (which only
// `run` makes), so that the output shows everything `run` creates: in
// YAML as a second document, in JSON as a second object.
func EncodeWithSecret(job *rayv1.RayJob, format string) ([]byte, error) {
	out, err := Encode(job, format)
	secret := AuthSecret(job)
	if err != nil || secret == nil {
		return out, err
	}
	more, err := encode(secret, "Secret "+secret.Name, format)
	if err != nil {
		return nil, err
	}
	if format == "json" {
		return append(out, more...), nil
	}
	note := "# Created by run right after the RayJob, owned by it (uid set then), with a fresh\n" +
		"# random token under data." + AuthTokenKey + ", or RAYSTEP_DASHBOARD_TOKEN when set; never printed.\n"
	return append(append(append(out, "---\n"...), note...), more...), nil
}

// encode is Encode for any object; what names it in errors.
func encode(obj any, what, format string) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	delete(doc, "status")
	if meta, ok := doc["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
		pruneOwnerUIDs(meta)
	}
	pruneTemplates(doc)
	switch format {
	case "json":
		out, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", what, err)
		}
		return append(out, '\n'), nil
	case "yaml", "":
		out, err := yaml.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", what, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown output format %q: want yaml or json", format)
}

// pruneOwnerUIDs drops the empty uid of owner references to an object
// that does not exist yet.
func pruneOwnerUIDs(meta map[string]any) {
	refs, _ := meta["ownerReferences"].([]any)
	for _, r := range refs {
		if rm, ok := r.(map[string]any); ok && rm["uid"] == "" {
			delete(rm, "uid")
		}
	}
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
