package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

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

// upSpec loads -f SPEC (or upBase) with the flags applied as overrides,
// validated as `validate` validates a spec: problems come back as one
// *schemas.ValidationErrors, naming the flag that gave the value.
func (a *app) upSpec(cmd *cobra.Command, o upOptions, profile *schemas.Profile) (*schemas.Spec, error) {
	if o.file == "-" {
		return nil, &usageError{errors.New("up: -f -: read the spec from a file")}
	}
	load := func(set []string) (*schemas.Spec, error) {
		opts := schemas.LoadOptions{Set: set, Profile: profile}
		if o.file == "" {
			return schemas.Parse(upFlagsSpecName, upBase, opts)
		}
		return schemas.LoadContext(cmd.Context(), o.file, opts)
	}
	base, err := load(o.set)
	if err != nil {
		return nil, err
	}
	overrides, err := a.upOverrides(cmd, o, base)
	if err != nil {
		return nil, err
	}
	set := append([]string(nil), o.set...)
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

// upOverrides turns up's flags into overrides of base: name and owner,
// and the first worker group (made when base has none and a worker flag
// asks for one).
func (a *app) upOverrides(cmd *cobra.Command, o upOptions, base *schemas.Spec) ([]upOverride, error) {
	var out []upOverride
	add := func(path, value, flag string) {
		out = append(out, upOverride{set: path + "=" + value, flag: flag})
	}
	owner := o.owner
	switch {
	case owner != "":
		add("metadata.owner", owner, "--owner "+owner)
	case o.file == "" && a.cfg.User != "":
		owner = a.cfg.User
		add("metadata.owner", owner, "$USER "+owner)
	case o.file == "":
		name, err := loginName()
		if err != nil {
			return nil, &usageError{fmt.Errorf("up: --owner WHO is required: USER is unset and %v", err)}
		}
		owner = name
		add("metadata.owner", owner, "the login name "+owner+" (USER is unset)")
	default:
		owner = base.Metadata.Owner
	}
	switch {
	case o.name != "":
		add("metadata.name", o.name, "--name "+o.name)
	case o.file == "":
		name := defaultClusterName(owner)
		add("metadata.name", name, fmt.Sprintf("the name %s made from the owner (pass --name)", name))
	}
	f := cmd.Flags()
	if o.local {
		return out, nil // no flag shapes workers of a local cluster (upLocal)
	}
	workerFlags := f.Changed("gpu") || f.Changed("workers") || f.Changed("cpus") || f.Changed("memory")
	if workerFlags && len(base.Spec.Cluster.Workers) == 0 {
		group := "cpu"
		if o.gpu != "" {
			group = "gpu"
		}
		add("spec.cluster.workers", fmt.Sprintf(`[{name: %s, cpus: "%s", memory: %s}]`, group, upWorkerCPUs, upWorkerMemory),
			"the worker group --gpu, --workers, --cpus or --memory asked for")
	}
	w := "spec.cluster.workers.0."
	if f.Changed("gpu") {
		add(w+"gpuType", o.gpu, "--gpu "+o.gpu)
	}
	if f.Changed("workers") {
		add(w+"replicas", fmt.Sprint(o.workers), fmt.Sprintf("--workers %d", o.workers))
	}
	if f.Changed("cpus") {
		add(w+"cpus", o.cpus, "--cpus "+o.cpus)
	}
	if f.Changed("memory") {
		add(w+"memory", o.memory, "--memory "+o.memory)
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

// defaultClusterName is the cluster name of an owner who names none:
// "ray-" and the owner as a DNS-1035 label, at most 40 characters.
func defaultClusterName(owner string) string {
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

// loginName is the name the OS gives the user raystep runs as (a root
// shell, a container, a cron job: where USER is unset); tests replace it.
var loginName = func() (string, error) {
	u, err := user.Current()
	switch {
	case err != nil:
		return "", fmt.Errorf("user ID %d has no name here (%v)", os.Getuid(), err)
	case u.Username == "":
		return "", fmt.Errorf("user ID %d has no name here", os.Getuid())
	}
	return u.Username, nil
}
