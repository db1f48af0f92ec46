package schemas

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/raystep/raystep/history"
)

//go:embed default_profile.yaml
var defaultProfile []byte

// Profile is the platform team's settings, shared by every spec: GPU pools,
// namespace, service account, allowed images, labels and pod security.
type Profile struct {
	// File is where the profile came from; "(built-in)" for the default.
	File string `json:"-"`
	// APIVersion is always APIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is always "PlatformProfile".
	Kind     string          `json:"kind"`
	Metadata ProfileMetadata `json:"metadata"`
	Spec     ProfileSpec     `json:"spec"`

	// Builtin marks the built-in profile (DefaultProfile), used when
	// neither --profile nor RAYSTEP_PROFILE names one.
	Builtin bool `json:"-"`
}

// Namespace is the namespace p places a spec in that names none, or ""
// for the built-in profile: nobody chose its namespace (default), so it
// yields to the kubeconfig context's, as kubectl does, and a pod's
// service-account namespace or a person's context is not overridden by
// it. kuberay.ResolveNamespace falls back to default after the
// kubeconfig's.
func (p *Profile) Namespace() string {
	if p.Builtin {
		return ""
	}
	return p.Spec.Namespace
}

// ProfileMetadata names a profile.
type ProfileMetadata struct {
	Name string `json:"name"`
}

// ProfileSpec holds the platform settings.
type ProfileSpec struct {
	// Namespace is the namespace of specs that name none.
	Namespace string `json:"namespace"`
	// ServiceAccount is the service account of every Ray pod; empty means
	// the namespace's default.
	ServiceAccount string      `json:"serviceAccount,omitempty"`
	Images         ImagePolicy `json:"images"`
	// Labels are added to every RayJob.
	Labels map[string]string `json:"labels,omitempty"`
	// Queue is the Kueue LocalQueue of steps whose GPU type names none
	// (see GPUType.Queue and Profile.QueueFor); empty means no queue.
	Queue string `json:"queue,omitempty"`
	// GPUTypes maps the GPU names specs use (WorkerGroup.GPUType) to
	// where such GPUs live.
	GPUTypes    map[string]GPUType `json:"gpuTypes"`
	PodSecurity PodSecurity        `json:"podSecurity"`
	// RayAuth turns on Ray's token authentication on KubeRay clusters.
	RayAuth RayAuth       `json:"rayAuth,omitzero"`
	Limits  ProfileLimits `json:"limits"`
	// Interactive bounds the clusters `raystep up` makes for people.
	Interactive Interactive `json:"interactive,omitzero"`
	// History is where ended steps' records and logs are kept, and for
	// how long.
	History HistoryProfile `json:"history,omitzero"`
}

// HistoryProfile names the store of the history (checked by
// history.ParseURL when the profile loads; empty: this machine's only)
// and how long gc keeps it (a Go duration; empty: history.DefaultKeep).
type HistoryProfile struct {
	URL  string `json:"url,omitempty"`
	Keep string `json:"keep,omitempty"`
}

// KeepFor is how long gc keeps an ended step's history.
func (h HistoryProfile) KeepFor() time.Duration {
	if d, msg := parseDuration(h.Keep); msg == "" {
		return d
	}
	return history.DefaultKeep
}

// Interactive is the profile's say on interactive clusters.
type Interactive struct {
	// TTL is how long an interactive cluster lives before `raystep gc`
	// deletes it.
	TTL InteractiveTTL `json:"ttl,omitzero"`
	// Notebook is the Jupyter server `raystep up --notebook` starts on
	// the head.
	Notebook NotebookProfile `json:"notebook,omitzero"`
	// Idle is up's --idle by default: how long a cluster may be idle
	// before its GPU workers are released (a Go duration, or "off");
	// empty means off.
	Idle string `json:"idle,omitempty"`
	// IdleStop is up's --idle-stop by default: how long a cluster may be
	// idle before it is deleted; empty means off.
	IdleStop string `json:"idleStop,omitempty"`
}

// IdleOff is the value of an idle setting that turns it off.
const IdleOff = "off"

// IdleDefaults returns the profile's defaults for up's --idle and
// --idle-stop, checked when the profile was loaded; zero means off.
func (i Interactive) IdleDefaults() (idle, stop time.Duration) {
	idle, _ = parseDuration(i.Idle)
	stop, _ = parseDuration(i.IdleStop)
	return idle, stop
}

// NotebookProfile is how the notebook of an interactive cluster runs: a
// Ray job on the head serving Jupyter on Port of the head's loopback.
type NotebookProfile struct {
	// Port is the server's port on the head; 0 means DefaultNotebookPort.
	Port int `json:"port,omitempty"`
	// App is NotebookLab (the default when empty) or NotebookServer.
	App string `json:"app,omitempty"`
	// Pip are the packages the notebook job installs (its runtime_env);
	// empty means the head's image has them.
	Pip []string `json:"pip,omitempty"`
}

// The notebook apps and port when the profile sets none.
const (
	NotebookLab         = "lab"
	NotebookServer      = "server"
	DefaultNotebookPort = 8888
)

// Resolved returns n with its defaults filled in.
func (n NotebookProfile) Resolved() NotebookProfile {
	if n.Port == 0 {
		n.Port = DefaultNotebookPort
	}
	if n.App == "" {
		n.App = NotebookLab
	}
	return n
}

// InteractiveTTL is the default and the longest life of an interactive
// cluster, as Go durations ("8h"); empty means DefaultInteractiveTTL and
// MaxInteractiveTTL.
type InteractiveTTL struct {
	Default string `json:"default,omitempty"`
	Max     string `json:"max,omitempty"`
}

// The TTL bounds of interactive clusters when the profile sets none.
const (
	DefaultInteractiveTTL = 8 * time.Hour
	MaxInteractiveTTL     = 24 * time.Hour
)

// TTLs returns the default and the longest TTL of an interactive cluster:
// the profile's, checked when it was loaded, else the built-in ones.
func (i Interactive) TTLs() (def, limit time.Duration) {
	def, limit = DefaultInteractiveTTL, MaxInteractiveTTL
	if d, msg := parseDuration(i.TTL.Max); msg == "" {
		limit = d
	}
	if d, msg := parseDuration(i.TTL.Default); msg == "" {
		def = d
	}
	return min(def, limit), limit
}

// The RayAuth modes a profile may name. Without one (RayAuthDefault),
// token authentication is on for every cluster whose Ray has it.
const (
	RayAuthDefault  = ""
	RayAuthToken    = "token"
	RayAuthDisabled = "disabled"
)

// MinTokenAuthRayVersion is the oldest Ray release with token
// authentication (KubeRay refuses authOptions for older ones).
const MinTokenAuthRayVersion = "2.52.0"

// RayAuth is Ray's authentication on the clusters raystep creates.
type RayAuth struct {
	// Mode is "token" (every Ray container gets RAY_AUTH_MODE=token and
	// RAY_AUTH_TOKEN from a Secret raystep creates; a spec whose Ray is
	// older than MinTokenAuthRayVersion is refused), "disabled", or empty:
	// token authentication wherever the cluster's Ray has it.
	Mode string `json:"mode,omitempty"`
}

// On reports whether a cluster of Ray rayVersion ("2.60.0") gets token
// authentication.
func (a RayAuth) On(rayVersion string) bool {
	switch a.Mode {
	case RayAuthToken:
		return true
	case RayAuthDisabled:
		return false
	}
	return !versionBelow(rayVersion, MinTokenAuthRayVersion)
}

// Warnings are what validate says about the profile itself: token
// authentication turned off.
func (p *Profile) Warnings() []FieldError {
	if p.Spec.RayAuth.Mode != RayAuthDisabled {
		return nil
	}
	return []FieldError{{File: p.File, Pointer: "/spec/rayAuth/mode", Message: "warning: Ray's token authentication is off " +
		"on every KubeRay cluster: anything that reaches a head service or a pod can submit jobs and read their logs " +
		"(leave the mode out, or set token)"}}
}

// ImagePolicy says which container images specs may use.
type ImagePolicy struct {
	// Allow holds path.Match patterns; a trailing "*" also matches "/".
	Allow []string `json:"allow"`
	// PullPolicy is the Kubernetes imagePullPolicy of every Ray container
	// (Always, IfNotPresent, Never); empty leaves Kubernetes' default.
	PullPolicy string `json:"pullPolicy,omitempty"`
	// PullSecrets name the image pull secrets of every Ray pod.
	PullSecrets []string `json:"pullSecrets,omitempty"`
}

// Allowed reports whether image matches one of the allow patterns.
func (p ImagePolicy) Allowed(image string) bool {
	for _, pat := range p.Allow {
		if ok, err := path.Match(pat, image); err == nil && ok {
			return true
		}
		if prefix, ok := strings.CutSuffix(pat, "*"); ok && !strings.ContainsAny(prefix, "*?[\\") && strings.HasPrefix(image, prefix) {
			return true
		}
	}
	return false
}

// GPUType maps an engineer-facing GPU name to where such GPUs live.
type GPUType struct {
	// ResourceName is the extended resource a worker requests its GPUs
	// as, e.g. nvidia.com/gpu.
	ResourceName string `json:"resourceName"`
	// NodeSelector and Tolerations place the workers on the nodes that
	// have such GPUs.
	NodeSelector map[string]string `json:"nodeSelector"`
	Tolerations  []Toleration      `json:"tolerations,omitempty"`
	// MaxPerWorker caps gpusPerWorker; 0 means no cap.
	MaxPerWorker int `json:"maxPerWorker,omitempty"`
	// Queue is the Kueue LocalQueue of steps with workers of this type;
	// empty means ProfileSpec.Queue.
	Queue string `json:"queue,omitempty"`
}

// Toleration mirrors a Kubernetes pod toleration.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// PodSecurity is the security context every Ray container gets.
type PodSecurity struct {
	// RunAsNonRoot, RunAsUser, RunAsGroup, FSGroup and
	// AllowPrivilegeEscalation are the Kubernetes security context fields
	// of the same names; nil leaves a field unset.
	RunAsNonRoot             *bool  `json:"runAsNonRoot,omitempty"`
	RunAsUser                *int64 `json:"runAsUser,omitempty"`
	RunAsGroup               *int64 `json:"runAsGroup,omitempty"`
	FSGroup                  *int64 `json:"fsGroup,omitempty"`
	AllowPrivilegeEscalation *bool  `json:"allowPrivilegeEscalation,omitempty"`
	// DropCapabilities are the Linux capabilities dropped, e.g. ALL.
	DropCapabilities []string `json:"dropCapabilities,omitempty"`
	// SeccompProfile is the seccomp profile type, e.g. RuntimeDefault.
	SeccompProfile string `json:"seccompProfile,omitempty"`
}

// ProfileLimits bounds what a spec may ask for; zero values mean no bound.
type ProfileLimits struct {
	// MaxWorkersPerGroup caps a worker group's replicas and maxReplicas.
	MaxWorkersPerGroup int `json:"maxWorkersPerGroup,omitempty"`
	// MaxRunTimeout caps spec.timeouts.run; a Go duration such as "72h".
	MaxRunTimeout string `json:"maxRunTimeout,omitempty"`
}

// DefaultProfile returns the built-in profile used when neither --profile nor
// RAYSTEP_PROFILE names one.
func DefaultProfile() (*Profile, error) {
	// The embedded profile is checked against the profile schema by
	// TestDefaultProfileMatchesSchema, so a run does not compile that
	// schema just to check it again.
	p, err := parseProfile("(built-in)", defaultProfile, false)
	if p != nil {
		p.Builtin = true
	}
	return p, err
}

// DefaultProfileYAML returns the built-in profile's source.
func DefaultProfileYAML() []byte { return append([]byte(nil), defaultProfile...) }

// LoadProfile reads, validates and defaults a profile file.
func LoadProfile(file string) (*Profile, error) {
	data, problem, err := readFile(context.Background(), file, nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read profile %s: %w", file, err)
	case problem != "":
		return nil, &ValidationErrors{Errors: []FieldError{{File: file, Pointer: "/", Message: problem}}}
	}
	return ParseProfile(file, data)
}

// ParseProfile validates and defaults a profile from YAML or JSON bytes;
// file only names it in errors.
func ParseProfile(file string, data []byte) (*Profile, error) {
	return parseProfile(file, data, true)
}

// parseProfile is ParseProfile; withSchema false skips the profile schema
// for a profile known to match it.
func parseProfile(file string, data []byte, withSchema bool) (*Profile, error) {
	tree, pos, errs := decodeTree(file, data)
	if len(errs.Errors) > 0 {
		return nil, errs.orNil()
	}
	if wrongKind(file, tree, pos, errs, profileKind) {
		return nil, errs.orNil()
	}
	if withSchema {
		sch, err := compiledProfile()
		if err != nil {
			return nil, err
		}
		if err := validateSchema(sch, file, tree, pos, errs); err != nil {
			return nil, err
		}
	}
	checkProfile(file, tree, pos, errs)
	if len(errs.Errors) > 0 {
		return nil, errs.orNil()
	}
	p := &Profile{File: file}
	if err := remarshal(tree, p); err != nil {
		return nil, fmt.Errorf("decode profile %s: %w", file, err)
	}
	p.applyDefaults()
	return p, nil
}

func (p *Profile) applyDefaults() {
	s := &p.Spec.PodSecurity
	if s.RunAsNonRoot == nil {
		s.RunAsNonRoot = ptr(true)
	}
	if s.AllowPrivilegeEscalation == nil {
		s.AllowPrivilegeEscalation = ptr(false)
	}
	if s.DropCapabilities == nil {
		s.DropCapabilities = []string{"ALL"}
	}
	if s.SeccompProfile == "" {
		s.SeccompProfile = "RuntimeDefault"
	}
}

// checkProfile applies rules the schema cannot express.
func checkProfile(file string, tree any, pos positions, errs *ValidationErrors) {
	spec, _ := tree.(map[string]any)["spec"].(map[string]any)
	checkLabels(file, pos, errs, "/spec/labels", spec["labels"])
	gpus, _ := spec["gpuTypes"].(map[string]any)
	for name, g := range gpus {
		gm, _ := g.(map[string]any)
		base := "/spec/gpuTypes/" + escapeToken(name)
		checkLabels(file, pos, errs, base+"/nodeSelector", gm["nodeSelector"])
		checkTolerations(file, pos, errs, base+"/tolerations", gm["tolerations"])
		if rn, _ := gm["resourceName"].(string); rn != "" {
			if msg := qualifiedName(rn); msg != "" {
				errs.add(file, pos, base+"/resourceName", "%q is not a resource name: %s", rn, msg)
			}
		}
	}
	checkPodSecurity(file, pos, errs, spec["podSecurity"])
	limits, _ := spec["limits"].(map[string]any)
	if d, ok := limits["maxRunTimeout"].(string); ok {
		if _, msg := parseDuration(d); msg != "" {
			errs.add(file, pos, "/spec/limits/maxRunTimeout", "%s", msg)
		}
	}
	checkInteractiveTTL(file, pos, errs, spec["interactive"])
	hist, _ := spec["history"].(map[string]any)
	if u, ok := hist["url"].(string); ok {
		if _, err := history.ParseURL(u); err != nil {
			errs.add(file, pos, "/spec/history/url", "%v", err)
		}
	}
	if k, ok := hist["keep"].(string); ok {
		if _, msg := parseDuration(k); msg != "" {
			errs.add(file, pos, "/spec/history/keep", "%s", msg)
		}
	}
}

// checkInteractiveTTL checks spec.interactive.ttl: durations, and a
// default no longer than the maximum.
func checkInteractiveTTL(file string, pos positions, errs *ValidationErrors, v any) {
	interactive, _ := v.(map[string]any)
	ttl, _ := interactive["ttl"].(map[string]any)
	got := map[string]time.Duration{}
	for _, k := range []string{"default", "max"} {
		s, ok := ttl[k].(string)
		if !ok {
			continue
		}
		d, msg := parseDuration(s)
		if msg != "" {
			errs.add(file, pos, "/spec/interactive/ttl/"+k, "%s", msg)
			continue
		}
		got[k] = d
	}
	def, okDef := got["default"]
	limit, okMax := got["max"]
	switch {
	case okDef && okMax && def > limit:
		errs.add(file, pos, "/spec/interactive/ttl/default", "%s is longer than max %s", def, limit)
	case okDef && !okMax && def > MaxInteractiveTTL:
		errs.add(file, pos, "/spec/interactive/ttl/default", "%s is longer than the built-in max %s: set max too", def, MaxInteractiveTTL)
	}
	if !okDef {
		def = min(DefaultInteractiveTTL, limit)
		if !okMax {
			def = DefaultInteractiveTTL
		}
	}
	idle := map[string]time.Duration{}
	for _, k := range []string{"idle", "idleStop"} {
		s, ok := interactive[k].(string)
		if !ok || s == IdleOff {
			continue
		}
		d, msg := parseDuration(s)
		switch {
		case msg != "":
			errs.add(file, pos, "/spec/interactive/"+k, "%s, or %q", msg, IdleOff)
		case d >= def:
			errs.add(file, pos, "/spec/interactive/"+k, "%s is not shorter than the default life of a cluster (%s): it would never act", d, def)
		default:
			idle[k] = d
		}
	}
	if i, ok := idle["idle"]; ok {
		if s, ok := idle["idleStop"]; ok && s <= i {
			errs.add(file, pos, "/spec/interactive/idleStop", "%s is not longer than idle (%s): the cluster would be deleted before its GPUs are released", s, i)
		}
	}
}

// checkTolerations applies Kubernetes' toleration rules: Exists takes no
// value, and Equal (the default) needs a key.
func checkTolerations(file string, pos positions, errs *ValidationErrors, ptr string, v any) {
	list, _ := v.([]any)
	for i, t := range list {
		tm, _ := t.(map[string]any)
		op, _ := tm["operator"].(string)
		key, _ := tm["key"].(string)
		val, _ := tm["value"].(string)
		p := ptr + "/" + strconv.Itoa(i)
		switch {
		case op == "Exists" && val != "":
			errs.add(file, pos, p+"/value", "must be empty when operator is Exists")
		case op != "Exists" && key == "":
			errs.add(file, pos, p+"/key", "is required unless operator is Exists")
		}
	}
}

// remarshal copies a validated tree into a typed value, strictly.
func remarshal(tree any, into any) error {
	data, err := json.Marshal(tree)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

func ptr[T any](v T) *T { return &v }

// readError words a file read error without repeating the path.
func readError(err error) string {
	if os.IsNotExist(err) {
		return "cannot read the file: it does not exist"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return "cannot read the file: " + pe.Err.Error()
	}
	return "cannot read the file: " + err.Error()
}
