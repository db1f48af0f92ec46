package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raystep/raystep/schemas"
)

// The cluster `raystep up` makes from flags alone: raystep's Ray release
// on the public image, a head, and workers when --gpu or --workers ask
// for them.
const (
	upRayVersion    = "2.60.0"
	upImage         = "rayproject/ray:2.60.0-py311"
	upWorkerCPUs    = "4"
	upWorkerMemory  = "16Gi"
	upFlagsSpecName = "raystep up"
)

// upBase is the spec `up` starts from without -f. An interactive cluster
// is checked by the job-spec schema and the profile exactly as a step's
// cluster is; a step's kind and entrypoint mean nothing to it, so the base
// names placeholders the schema accepts, and the flags set the rest.
var upBase = []byte(`apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: placeholder, owner: placeholder}
spec:
  kind: train
  entrypoint: "true"
  cluster: {rayVersion: "` + upRayVersion + `", image: "` + upImage + `"}
`)

// upOverride is one flag turned into a --set override, and how errors
// about its value name it.
type upOverride struct{ set, flag string }

// Spec loads -f SPEC (or upBase) with the flags applied as overrides,
// validated as `validate` validates a spec: problems come back as one
// *schemas.ValidationErrors, naming the flag that gave the value. With
// workers false no flag shapes worker groups (a backend whose cluster is
// one head).
func (r UpRequest) Spec(ctx context.Context, workers bool) (*schemas.Spec, error) {
	if r.File == "-" {
		return nil, Usage("up: -f -: read the spec from a file")
	}
	load := func(set []string) (*schemas.Spec, error) {
		opts := schemas.LoadOptions{Set: set, Profile: r.Profile}
		if r.File == "" {
			return schemas.Parse(upFlagsSpecName, upBase, opts)
		}
		return schemas.LoadContext(ctx, r.File, opts)
	}
	base, err := load(r.Set)
	if err != nil {
		return nil, err
	}
	overrides, err := r.overrides(base, workers)
	if err != nil {
		return nil, err
	}
	set := append([]string(nil), r.Set...)
	for _, ov := range overrides {
		set = append(set, ov.set)
	}
	spec, err := load(set)
	var ve *schemas.ValidationErrors
	if errors.As(err, &ve) {
		blameFlags(ve, overrides)
	}
	return spec, err
}

// overrides turns up's flags into overrides of base: name and owner,
// and, with workers, the first worker group (made when base has none and
// a worker flag asks for one).
func (r UpRequest) overrides(base *schemas.Spec, workers bool) ([]upOverride, error) {
	var out []upOverride
	add := func(path, value, flag string) {
		out = append(out, upOverride{set: path + "=" + value, flag: flag})
	}
	owner := r.Owner
	switch {
	case owner != "":
		add("metadata.owner", owner, "--owner "+owner)
	case r.File == "":
		who, from, err := r.DefaultOwner()
		if err != nil {
			return nil, err
		}
		owner = who
		add("metadata.owner", owner, from)
	default:
		owner = base.Metadata.Owner
	}
	switch {
	case r.Name != "":
		add("metadata.name", r.Name, "--name "+r.Name)
	case r.File == "":
		name := DefaultClusterName(owner)
		add("metadata.name", name, fmt.Sprintf("the name %s made from the owner (pass --name)", name))
	}
	if !workers {
		return out, nil
	}
	workerFlags := r.given("gpu") || r.given("workers") || r.given("cpus") || r.given("memory")
	if workerFlags && len(base.Spec.Cluster.Workers) == 0 {
		group := "cpu"
		if r.GPU != "" {
			group = "gpu"
		}
		add("spec.cluster.workers", fmt.Sprintf(`[{name: %s, cpus: "%s", memory: %s}]`, group, upWorkerCPUs, upWorkerMemory),
			"the worker group --gpu, --workers, --cpus or --memory asked for")
	}
	w := "spec.cluster.workers.0."
	if r.given("gpu") {
		add(w+"gpuType", r.GPU, "--gpu "+r.GPU)
	}
	if r.given("workers") {
		add(w+"replicas", fmt.Sprint(r.Workers), fmt.Sprintf("--workers %d", r.Workers))
	}
	if r.given("cpus") {
		add(w+"cpus", r.CPUs, "--cpus "+r.CPUs)
	}
	if r.given("memory") {
		add(w+"memory", r.Memory, "--memory "+r.Memory)
	}
	return out, nil
}

// blameFlags names the flag, not the override it became, in errors about
// a value a flag gave: "--gpu h200: unknown gpuType ...".
func blameFlags(ve *schemas.ValidationErrors, overrides []upOverride) {
	for i, e := range ve.Errors {
		for _, ov := range overrides {
			if e.File == schemas.SetFile(ov.set) {
				ve.Errors[i].File, ve.Errors[i].Pointer = ov.flag, "/"
			}
		}
	}
}

// DefaultClusterName is the cluster name of an owner who names none:
// "ray-" and the owner as a DNS-1035 label, at most 40 characters.
func DefaultClusterName(owner string) string {
	var b strings.Builder
	b.WriteString("ray-")
	for _, c := range strings.ToLower(owner) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteRune('-')
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.TrimRight(name, "-")
}

// Lifetime is --ttl, else the profile's default, checked against the
// profile's maximum.
func (r UpRequest) Lifetime() (time.Duration, error) {
	def, limit := r.Profile.Spec.Interactive.TTLs()
	switch {
	case !r.given("ttl"):
		return def, nil
	case r.TTL <= 0:
		return 0, Usage(fmt.Sprintf("up: --ttl %s: must be positive", r.TTL))
	case r.TTL > limit:
		return 0, Usage(fmt.Sprintf("up: --ttl %s: longer than %s, the maximum of profile %s (spec.interactive.ttl.max)",
			r.TTL, limit, r.Profile.Metadata.Name))
	}
	return r.TTL, nil
}

// Idle is what an interactive cluster does when nobody uses it: after
// Release of idleness its GPU workers are released, after Stop it is
// deleted; zero is never.
type Idle struct{ Release, Stop time.Duration }

// Idleness is --idle and --idle-stop, else the profile's defaults
// (spec.interactive.idle, idleStop), checked against each other and
// against ttl, the cluster's life: a setting that could never act is
// refused, not ignored.
func (r UpRequest) Idleness(ttl time.Duration) (Idle, error) {
	var out Idle
	out.Release, out.Stop = r.Profile.Spec.Interactive.IdleDefaults()
	parse := func(flag, v string, into *time.Duration) error {
		if !r.given(flag) {
			return nil
		}
		if v == schemas.IdleOff {
			*into = 0
			return nil
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return Usage(fmt.Sprintf("up: --%s %s: want a duration such as 30m, or %s", flag, v, schemas.IdleOff))
		case d <= 0:
			return Usage(fmt.Sprintf("up: --%s %s: must be positive (--%s %s keeps the cluster as it is while idle)", flag, v, flag, schemas.IdleOff))
		case d < time.Second || d%time.Second != 0:
			return Usage(fmt.Sprintf("up: --%s %s: want a whole number of seconds", flag, v))
		}
		*into = d
		return nil
	}
	if err := parse("idle", r.Idle, &out.Release); err != nil {
		return Idle{}, err
	}
	if err := parse("idle-stop", r.IdleStop, &out.Stop); err != nil {
		return Idle{}, err
	}
	from := func(flag string) string {
		if r.given(flag) {
			return "--" + flag
		}
		return fmt.Sprintf("the default of profile %s (spec.interactive.%s)", r.Profile.Metadata.Name,
			map[string]string{"idle": "idle", "idle-stop": "idleStop"}[flag])
	}
	switch {
	case out.Release >= ttl && out.Release > 0:
		return Idle{}, Usage(fmt.Sprintf("up: %s %s is not shorter than the cluster's life (%s): it would never release its GPUs; "+
			"pass a shorter --idle, or --idle %s", from("idle"), out.Release, ttl, schemas.IdleOff))
	case out.Stop >= ttl && out.Stop > 0:
		return Idle{}, Usage(fmt.Sprintf("up: %s %s is not shorter than the cluster's life (%s): it expires first; "+
			"pass a shorter --idle-stop, or --idle-stop %s", from("idle-stop"), out.Stop, ttl, schemas.IdleOff))
	case out.Release > 0 && out.Stop > 0 && out.Stop <= out.Release:
		return Idle{}, Usage(fmt.Sprintf("up: %s %s is not longer than %s %s: the cluster would be deleted before its GPUs are released",
			from("idle-stop"), out.Stop, from("idle"), out.Release))
	}
	return out, nil
}
