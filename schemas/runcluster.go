package schemas

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// RunCluster is the cluster section the steps of one Dagster run share
// (raystep run --run-cluster FILE). A spec whose spec.cluster.reuse is run
// takes it instead of its own spec.cluster, so every step of the run has
// the same section and the run gets one cluster, whatever each step's file
// says. The file holds one key, cluster: a job spec's cluster section
// without reuse, which stays each step's choice. Its values are validated
// with each spec they join, like the spec's own, and a problem with one
// names the run cluster file and the value's pointer in it
// (FILE: /cluster/workers/0/gpuType: ...).
type RunCluster struct {
	// File is the file as the user named it.
	File    string
	cluster map[string]any
	pos     positions
}

// runClusterKey is the one key of a run cluster file.
const runClusterKey = "cluster"

// LoadRunCluster reads the run cluster file. Problems with it come back
// as one *ValidationErrors; other errors mean raystep itself is broken.
func LoadRunCluster(ctx context.Context, file string) (*RunCluster, error) {
	if file == "-" {
		return nil, &ValidationErrors{Errors: []FieldError{{File: StdinName, Pointer: "/",
			Message: "a run cluster file cannot be read from stdin: name a file"}}}
	}
	data, problem, err := readFile(ctx, file, nil)
	switch {
	case err != nil:
		return nil, err
	case problem != "":
		return nil, &ValidationErrors{Errors: []FieldError{{File: file, Pointer: "/", Message: problem}}}
	}
	tree, pos, errs := decodeTree(file, data)
	if len(errs.Errors) > 0 {
		return nil, errs.orNil()
	}
	const what = "the cluster section the steps of a run share, as in a job spec's spec.cluster"
	root, ok := tree.(map[string]any)
	if !ok {
		errs.add(file, pos, "/", "expected a map with one key, cluster: %s", what)
		return nil, errs.orNil()
	}
	for k := range root {
		if k != runClusterKey {
			errs.add(file, pos, "/"+escapeToken(k), "unknown key %q: a run cluster file holds one key, cluster: %s", k, what)
		}
	}
	cluster, ok := root[runClusterKey].(map[string]any)
	switch v, has := root[runClusterKey]; {
	case !has:
		errs.add(file, pos, "/", "required key %q is missing: %s", runClusterKey, what)
	case !ok:
		errs.add(file, pos, "/cluster", "expected a map, got %s: %s", describeValue(v), what)
	}
	if _, has := cluster["reuse"]; has {
		errs.add(file, pos, "/cluster/reuse", "not allowed in a run cluster file: whether a step shares the run's cluster "+
			"is its own spec.cluster.reuse (or the Dagster resource's cluster_reuse)")
	}
	if len(errs.Errors) > 0 {
		return nil, errs.orNil()
	}
	return &RunCluster{File: file, cluster: cluster, pos: pos}, nil
}

// describeValue names the kind of a decoded value for an error.
func describeValue(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// graft puts rc's cluster section in place of tree's spec.cluster, keeping
// the spec's reuse, when the spec with the overrides set asks for reuse:
// run, and blames the values it put there on rc's file. It reports
// whether it did.
func (rc *RunCluster) graft(tree any, pos positions, set []string) bool {
	if rc == nil || reuseAfter(tree, set) != string(ReuseRun) {
		return false
	}
	root, _ := tree.(map[string]any)
	spec, ok := root["spec"].(map[string]any)
	if !ok {
		return false
	}
	cluster := copyTree(rc.cluster).(map[string]any)
	if own, _ := spec["cluster"].(map[string]any); own != nil {
		if r, has := own["reuse"]; has {
			cluster["reuse"] = r
		}
	}
	spec["cluster"] = cluster
	for p := range pos {
		if under(p, "/spec/cluster") && p != "/spec/cluster/reuse" {
			delete(pos, p)
		}
	}
	for p, q := range rc.pos {
		if under(p, "/cluster") {
			q.file, q.trim = rc.File, "/spec"
			pos["/spec"+p] = q
		}
	}
	return true
}

// reuseAfter is tree's spec.cluster.reuse once the overrides set are
// applied (to a copy: tree is left as it is).
func reuseAfter(tree any, set []string) string {
	t, _ := ApplySet(copyTree(tree), set) // the real pass reports bad overrides
	root, _ := t.(map[string]any)
	spec, _ := root["spec"].(map[string]any)
	cluster, _ := spec["cluster"].(map[string]any)
	r, _ := cluster["reuse"].(string)
	return r
}

// under reports whether pointer p is ptr or inside it.
func under(p, ptr string) bool { return p == ptr || strings.HasPrefix(p, ptr+"/") }

// copyTree copies the maps and lists of a decoded tree, so overrides
// applied to one spec never reach another.
func copyTree(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = copyTree(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = copyTree(x)
		}
		return out
	}
	return v
}

// rayMemoryShare is the part of a node's memory Ray lets tasks and
// drivers reserve: by default it keeps 30% for its object store.
const rayMemoryShare = 0.7

// node is what one Ray node of a cluster offers a driver.
type node struct {
	name          string
	cpus, memory  float64
	gpus          int32
	gpuType       string
	memoryDisplay string
}

// nodes lists the head and each worker group that can have a worker.
func nodes(c Cluster) []node {
	out := []node{{name: "head", cpus: c.Head.CPUs.AsApproximateFloat64(), memory: c.Head.Memory.AsApproximateFloat64(),
		memoryDisplay: c.Head.Memory.String()}}
	for _, w := range c.Workers {
		if w.MaxReplicas < 1 {
			continue
		}
		out = append(out, node{name: "workers " + w.Name, cpus: w.CPUs.AsApproximateFloat64(), memory: w.Memory.AsApproximateFloat64(),
			gpus: w.GPUsPerWorker, gpuType: w.GPUType, memoryDisplay: w.Memory.String()})
	}
	return out
}

// acceleratorPrefix starts the custom resource Ray gives a GPU node of
// each accelerator type (accelerator_type:A100).
const acceleratorPrefix = "accelerator_type:"

// fits reports whether the driver's resources r fit on n.
func (n node) fits(r EntrypointResources) bool {
	if r.CPUs > n.cpus || r.GPUs > float64(n.gpus) || r.Memory.AsApproximateFloat64() > rayMemoryShare*n.memory {
		return false
	}
	for name := range r.Resources {
		t, ok := strings.CutPrefix(name, acceleratorPrefix)
		if !ok || n.gpus == 0 || !strings.HasPrefix(alnum(n.gpuType), alnum(t)) {
			return false
		}
	}
	return true
}

// alnum lower-cases s and keeps its letters and digits, so Ray's A100-80G
// matches a profile's a100-80gb.
func alnum(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}

// checkFit refuses, at /spec/entrypointResources, a spec whose driver
// fits on no node of the run's cluster: Ray would keep its job PENDING
// until the run's timeout.
func (rc *RunCluster) checkFit(file string, pos positions, s *Spec) error {
	r := s.Spec.EntrypointResources
	ns := nodes(s.Spec.Cluster)
	if slices.ContainsFunc(ns, func(n node) bool { return n.fits(r) }) {
		return nil
	}
	offers := make([]string, len(ns))
	for i, n := range ns {
		offers[i] = fmt.Sprintf("%s %g CPUs %s", n.name, n.cpus, n.memoryDisplay)
		if n.gpus > 0 {
			offers[i] += fmt.Sprintf(" %d %s GPUs", n.gpus, n.gpuType)
		}
	}
	errs := &ValidationErrors{}
	errs.add(file, pos, "/spec/entrypointResources",
		"the driver needs %s on one node, and no node of the run's cluster (%s) has that: %s "+
			"(Ray lets a driver reserve %.0f%% of a node's memory; a custom resource other than %sTYPE is on no raystep node); "+
			"add a worker group that fits to %[2]s, or give this step a cluster of its own with spec.cluster.reuse: step",
		describeNeeds(r), rc.File, strings.Join(offers, "; "), rayMemoryShare*100, acceleratorPrefix)
	return errs.orNil()
}

// describeNeeds says what r reserves.
func describeNeeds(r EntrypointResources) string {
	var parts []string
	if r.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%g CPUs", r.CPUs))
	}
	if r.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%g GPUs", r.GPUs))
	}
	if !r.Memory.IsZero() {
		parts = append(parts, r.Memory.String()+" of memory")
	}
	names := make([]string, 0, len(r.Resources))
	for k := range r.Resources {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%g %s", r.Resources[k], k))
	}
	return strings.Join(parts, ", ")
}
