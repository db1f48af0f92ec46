package schemas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// LoadOptions changes how a spec is loaded.
type LoadOptions struct {
	// Set holds "path=value" overrides applied before validation (see ApplySet).
	Set []string
	// Profile checks GPU types and images; nil means DefaultProfile().
	Profile *Profile
	// Stdin is read for the file "-"; the spec is then named StdinName in
	// errors and a relative workingDir is relative to the current directory
	// (see specDir).
	Stdin io.Reader
	// RunCluster, when set, replaces spec.cluster of a spec whose
	// spec.cluster.reuse is run (after Set) before Set applies, and
	// the driver's entrypointResources must fit on one of its nodes.
	RunCluster *RunCluster
	// Partitions, when set, is the run the spec is loaded for: every
	// ${RAYSTEP_...} variable the spec uses must be one the run defines, and
	// the loaded spec has them substituted and set in env_vars. Nil (as for
	// validate) checks only that the variables are raystep's.
	Partitions *Partitions
}

// Load reads, overrides, validates and defaults the spec in file (YAML or
// JSON), or in opts.Stdin for "-". Any problem with the input, however many,
// comes back as one *ValidationErrors; other errors mean raystep itself is
// broken.
func Load(file string, opts LoadOptions) (*Spec, error) {
	return LoadContext(context.Background(), file, opts)
}

// LoadContext is Load that gives up when ctx is done: it then returns an
// error wrapping context.Cause(ctx) at once, even while reading a pipe that
// never closes or parsing. The abandoned work is bounded by the limits in
// limits.go and ends with the process.
func LoadContext(ctx context.Context, file string, opts LoadOptions) (*Spec, error) {
	type result struct {
		spec *Spec
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		spec, err := load(ctx, file, opts)
		ch <- result{spec, err}
	}()
	select {
	case r := <-ch:
		return r.spec, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("load %s: %w", displayName(file), context.Cause(ctx))
	}
}

func load(ctx context.Context, file string, opts LoadOptions) (*Spec, error) {
	data, problem, err := readFile(ctx, file, opts.Stdin)
	name := displayName(file)
	switch {
	case err != nil:
		return nil, err
	case problem != "":
		return nil, &ValidationErrors{Errors: []FieldError{{File: name, Pointer: "/", Message: problem}}}
	}
	return Parse(name, data, opts)
}

// displayName is how errors name file: StdinName for "-".
func displayName(file string) string {
	if file == "-" {
		return StdinName
	}
	return file
}

// Parse is Load for bytes already read; file names the spec in errors and
// anchors a relative workingDir.
func Parse(file string, data []byte, opts LoadOptions) (*Spec, error) {
	profile := opts.Profile
	if profile == nil {
		p, err := DefaultProfile()
		if err != nil {
			return nil, fmt.Errorf("built-in profile: %w", err)
		}
		profile = p
	}
	sch, err := compiledJobSpec()
	if err != nil {
		return nil, err
	}
	tree, pos, errs := decodeTree(file, data)
	if len(errs.Errors) > 0 {
		return nil, errs.orNil()
	}
	if wrongKind(file, tree, pos, errs, specKind) {
		return nil, errs.orNil()
	}
	grafted := opts.RunCluster.graft(tree, pos, opts.Set)
	tree, err = ApplySet(tree, opts.Set)
	blameSet(pos, opts.Set)
	var setErrs *ValidationErrors
	if errors.As(err, &setErrs) {
		errs.Errors = append(errs.Errors, setErrs.Errors...)
	}
	if len(opts.Set) > 0 {
		// The file's own text was checked as it was decoded; what --set
		// brought in is checked here, by the same rules.
		checkControls(file, pos, errs, tree, "")
	}
	if err := validateSchema(sch, file, tree, pos, errs); err != nil {
		return nil, err
	}
	dir := specDir(file)
	chk := &checker{file: file, dir: dir, pos: pos, errs: errs, profile: profile, partitions: opts.Partitions}
	chk.spec(tree)
	if len(errs.Errors) > 0 {
		return nil, errs.orNil()
	}
	s, err := build(file, dir, tree, profile)
	if err == nil {
		chk.warns.sort()
		s.Warnings = chk.warns.Errors
	}
	if err == nil && opts.Partitions != nil {
		s.Spec.applyPartitions(opts.Partitions)
	}
	if err != nil || !grafted {
		return s, err
	}
	s.ClusterFile = opts.RunCluster.File
	if err := opts.RunCluster.checkFit(file, pos, s); err != nil {
		return nil, err
	}
	return s, nil
}

// build turns a valid tree into a defaulted Spec; dir is the spec's
// specDir.
func build(file, dir string, tree any, profile *Profile) (*Spec, error) {
	var raw rawSpec
	if err := remarshal(tree, &raw); err != nil {
		return nil, fmt.Errorf("decode spec %s: %w", file, err)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", file, err)
	}
	if file == StdinName {
		abs = StdinName
	}
	s := &Spec{
		File:       abs,
		APIVersion: raw.APIVersion,
		Kind:       raw.Kind,
		Metadata: Metadata{
			Name: raw.Metadata.Name, Namespace: raw.Metadata.Namespace, Owner: raw.Metadata.Owner,
			Labels: raw.Metadata.Labels, Annotations: raw.Metadata.Annotations,
		},
	}
	if s.Metadata.Namespace == "" {
		s.Metadata.Namespace = profile.Namespace()
	}
	s.Spec = buildJobSpec(&raw)
	if r := raw.Spec; r.WorkingDir != "" {
		dir, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("resolve the directory of %s: %w", file, err)
		}
		s.Spec.WorkingDir = resolveDir(dir, r.WorkingDir)
	}
	return s, nil
}

// buildJobSpec defaults the spec part of a valid raw spec.
func buildJobSpec(raw *rawSpec) JobSpec {
	r := raw.Spec
	js := JobSpec{
		Kind:       StepKind(r.Kind),
		Entrypoint: r.Entrypoint,
		RuntimeEnv: r.RuntimeEnv,
		Teardown:   Teardown(or(r.Teardown, string(TeardownAlways))),
		EntrypointResources: EntrypointResources{
			CPUs: r.EntrypointResources.CPUs, GPUs: r.EntrypointResources.GPUs,
			Memory:    mustQuantity(r.EntrypointResources.Memory, ""),
			Resources: r.EntrypointResources.Resources,
		},
		Cluster: Cluster{
			RayVersion: r.Cluster.RayVersion,
			Image:      r.Cluster.Image,
			Reuse:      Reuse(or(r.Cluster.Reuse, string(ReuseStep))),
			Head: Head{
				CPUs:   mustQuantity(r.Cluster.Head.CPUs, defaultHeadCPUs),
				Memory: mustQuantity(r.Cluster.Head.Memory, defaultHeadMemory),
			},
		},
		Timeouts: Timeouts{
			Provision:        mustDuration(r.Timeouts.Provision, defaultProvision),
			Run:              mustDuration(r.Timeouts.Run, defaultRun),
			TTLAfterFinished: mustDuration(r.Timeouts.TTLAfterFinished, defaultTTL),
			Queue:            mustDuration(r.Timeouts.Queue, ""),
		},
	}
	for _, w := range r.Cluster.Workers {
		js.Cluster.Workers = append(js.Cluster.Workers, buildWorker(w))
	}
	for _, e := range r.Cluster.SecretEnv {
		js.Cluster.SecretEnv = append(js.Cluster.SecretEnv, SecretEnv(e))
	}
	return js
}

// Defaults applied after validation; the schema documents the same values.
const (
	defaultHeadCPUs   = "2"
	defaultHeadMemory = "4Gi"
	defaultProvision  = "15m"
	defaultRun        = "24h"
	defaultTTL        = "10m"
)

func buildWorker(w rawWorker) WorkerGroup {
	lo, hi, replicas := replicaRange(w)
	g := WorkerGroup{
		Name: w.Name, Replicas: replicas, MinReplicas: lo, MaxReplicas: hi,
		GPUType: w.GPUType,
		CPUs:    mustQuantity(w.CPUs, ""), Memory: mustQuantity(w.Memory, ""),
	}
	switch {
	case w.GPUsPerWorker != nil:
		g.GPUsPerWorker = *w.GPUsPerWorker
	case w.GPUType != "":
		g.GPUsPerWorker = 1
	}
	return g
}

// replicaRange fills in replicas, minReplicas and maxReplicas from whichever
// are given: a fixed-size group has min = max = replicas (default 1); an
// autoscaling group starts at minReplicas unless replicas says otherwise.
func replicaRange(w rawWorker) (lo, hi, replicas int32) {
	switch {
	case w.MinReplicas == nil && w.MaxReplicas == nil:
		r := deref(w.Replicas, 1)
		return r, r, r
	default:
		lo = deref(w.MinReplicas, 0)
		hi = deref(w.MaxReplicas, max32(lo, deref(w.Replicas, lo)))
		replicas = deref(w.Replicas, lo)
		return lo, hi, replicas
	}
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// specDir is what a relative workingDir is relative to: the spec file's
// directory, or the current directory for a spec that has none: one read
// from stdin (-f - or -f /dev/stdin), from another of the process's
// descriptors, as the shell's `-f <(envsubst < train.yaml)` passes one
// (/dev/fd/63, whose directory holds descriptors, not the user's files),
// or from a pipe or device.
func specDir(file string) string {
	if file == StdinName || descriptorName(file) {
		return "."
	}
	if st, err := os.Stat(file); err == nil && !st.Mode().IsRegular() {
		return "."
	}
	return filepath.Dir(file)
}

// descriptorName reports whether file names one of the process's open
// descriptors rather than a file of the user's.
func descriptorName(file string) bool {
	file = filepath.Clean(file)
	if file == "/dev/stdin" || strings.HasPrefix(file, "/dev/fd/") {
		return true
	}
	rest, ok := strings.CutPrefix(file, "/proc/")
	return ok && strings.Contains(rest, "/fd/")
}

// resolveDir makes dir absolute against base.
func resolveDir(base, dir string) string {
	if filepath.IsAbs(dir) {
		return filepath.Clean(dir)
	}
	return filepath.Join(base, dir)
}

// The kinds of document raystep reads.
const (
	specKind    = "RayStep"
	profileKind = "PlatformProfile"
)

// knownKinds names the kinds of document people hand raystep, by kind,
// with their API group and how each is given to it, for the one error when
// one is given where another belongs: its schema's errors would call every
// key unknown or missing. A document counts as one only with its group's
// apiVersion: a raystep spec whose kind is a typo keeps the schema's errors.
var knownKinds = map[string]struct{ group, what, how string }{
	specKind:    {"raystep.dev", "a raystep job spec", "pass it with -f"},
	profileKind: {"raystep.dev", "a raystep platform profile", "pass it with --profile (or RAYSTEP_PROFILE)"},
	"RayJob": {"ray.io", "a KubeRay RayJob",
		"raystep makes one from a job spec (raystep render prints it): pass the job spec"},
	"RayCluster": {"ray.io", "a KubeRay RayCluster",
		"raystep makes one from a job spec's cluster section (raystep up -f SPEC): pass the job spec"},
}

// wrongKind adds one error to errs and reports true when tree is a
// document of a known kind other than want.
func wrongKind(file string, tree any, pos positions, errs *ValidationErrors, want string) bool {
	root, _ := tree.(map[string]any)
	kind, _ := root["kind"].(string)
	apiVersion, _ := root["apiVersion"].(string)
	got, known := knownKinds[kind]
	if kind == want || !known || !strings.HasPrefix(apiVersion, got.group+"/") {
		return false
	}
	errs.add(file, pos, "/kind", "this is %s (kind %s), not %s: %s", got.what, kind, knownKinds[want].what, got.how)
	return true
}
