package schemas

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// reservedLabel matches label keys raystep sets itself.
var reservedLabel = regexp.MustCompile(`^(raystep\.dev/|ray\.io/|kueue\.x-k8s\.io/|app\.kubernetes\.io/managed-by$)`)

// imageVersion finds the Ray version at the start of an image tag.
var imageVersion = regexp.MustCompile(`^(\d+\.\d+\.\d+)`)

// checker applies the rules a JSON Schema cannot express. It reads the raw
// tree defensively: values of the wrong type were already reported by the
// schema and are skipped here.
type checker struct {
	file, dir string
	pos       positions
	errs      *ValidationErrors
	warns     ValidationErrors
	profile   *Profile
	// partitions is the run the spec is loaded for; nil when unknown.
	partitions *Partitions
}

func (c *checker) add(ptr, format string, args ...any) {
	c.errs.add(c.file, c.pos, ptr, format, args...)
}

// warn records a problem that does not make the spec invalid.
func (c *checker) warn(ptr, format string, args ...any) {
	c.warns.add(c.file, c.pos, ptr, format, args...)
}

func (c *checker) spec(tree any) {
	root, _ := tree.(map[string]any)
	meta, _ := root["metadata"].(map[string]any)
	spec, _ := root["spec"].(map[string]any)
	c.metadata(meta)
	c.vars(spec)
	if ep, ok := spec["entrypoint"].(string); ok && ep != "" && strings.TrimSpace(ep) == "" {
		c.add("/spec/entrypoint", "must not be blank")
	}
	if wd, ok := spec["workingDir"].(string); ok && wd != "" {
		c.workingDir(wd)
	}
	cluster, _ := spec["cluster"].(map[string]any)
	c.cluster(cluster)
	renv, _ := spec["runtimeEnv"].(map[string]any)
	c.secretEnv(cluster, renv)
	c.queue(cluster)
	c.entrypointResources(spec["entrypointResources"], cluster)
	timeouts, _ := spec["timeouts"].(map[string]any)
	c.timeouts(timeouts)
	c.sizes(tree)
}

func (c *checker) metadata(meta map[string]any) {
	checkLabels(c.file, c.pos, c.errs, "/metadata/labels", meta["labels"])
	labels, _ := meta["labels"].(map[string]any)
	for k := range labels {
		if reservedLabel.MatchString(k) {
			c.add("/metadata/labels/"+escapeToken(k), "label %q is set by raystep and cannot be overridden", k)
		}
	}
	ann, _ := meta["annotations"].(map[string]any)
	for k := range ann {
		if msg := qualifiedName(k); msg != "" {
			c.add("/metadata/annotations/"+escapeToken(k), "%q is not a valid annotation key: %s", k, msg)
		}
	}
}

func (c *checker) workingDir(wd string) {
	st, err := os.Stat(resolveDir(c.dir, wd))
	switch {
	case err != nil:
		c.add("/spec/workingDir", "%q (relative to %s) does not exist", wd, c.relativeTo())
	case !st.IsDir():
		c.add("/spec/workingDir", "%q is not a directory", wd)
	}
}

// relativeTo says what a relative workingDir is relative to.
func (c *checker) relativeTo() string {
	if c.file == StdinName || c.dir != filepath.Dir(c.file) {
		return "the current directory" // the spec has no directory (see specDir)
	}
	return "the spec's directory"
}

func (c *checker) cluster(cluster map[string]any) {
	if img, ok := cluster["image"].(string); ok && img != "" {
		c.image(img, cluster["rayVersion"])
	}
	c.rayAuth(cluster["rayVersion"])
	head, _ := cluster["head"].(map[string]any)
	for _, k := range []string{"cpus", "memory"} {
		c.positiveQuantity("/spec/cluster/head/"+k, head[k])
	}
	workers, _ := cluster["workers"].([]any)
	seen := map[string]int{}
	for i, w := range workers {
		wm, _ := w.(map[string]any)
		base := fmt.Sprintf("/spec/cluster/workers/%d", i)
		if g, ok := wm["name"].(string); ok && g != "" {
			if j, dup := seen[g]; dup {
				c.add(base+"/name", "worker group %q is already defined at /spec/cluster/workers/%d", g, j)
			}
			seen[g] = i
		}
		c.worker(base, wm)
	}
}

// reservedEnv matches the environment variables Ray, KubeRay, raystep and
// Dagster Pipes set in a Ray container themselves (RAY_AUTH_TOKEN, the
// partition and Pipes variables, ...): a secret must not replace one.
var reservedEnv = regexp.MustCompile(`^(RAY_|RAYSTEP_|KUBERAY_|DAGSTER_PIPES_)`)

// secretEnv refuses two entries of spec.cluster.secretEnv for one
// variable, one that runtimeEnv.env_vars sets too (the job's runtime_env
// would win, in plain sight), and one that Ray or raystep sets.
func (c *checker) secretEnv(cluster, runtimeEnv map[string]any) {
	entries, _ := cluster["secretEnv"].([]any)
	plain, _ := runtimeEnv["env_vars"].(map[string]any)
	seen := map[string]int{}
	for i, e := range entries {
		em, _ := e.(map[string]any)
		name, ok := em["name"].(string)
		if !ok || name == "" {
			continue
		}
		ptr := fmt.Sprintf("/spec/cluster/secretEnv/%d/name", i)
		if j, dup := seen[name]; dup {
			c.add(ptr, "%s is already set from a Secret by secretEnv[%d]", name, j)
		}
		seen[name] = i
		if _, both := plain[name]; both {
			c.add(ptr, "%s is also in spec.runtimeEnv.env_vars, whose value the Ray dashboard shows: keep it in one place", name)
		}
		if reservedEnv.MatchString(name) {
			c.add(ptr, "%s is a name Ray, KubeRay, raystep or Dagster Pipes sets in the Ray containers (RAY_*, RAYSTEP_*, KUBERAY_*, DAGSTER_PIPES_*)", name)
		}
	}
}

func (c *checker) image(img string, rayVersion any) {
	if !c.profile.Spec.Images.Allowed(img) {
		c.add("/spec/cluster/image", "image %q is not allowed by profile %s (allowed: %s)",
			img, c.profile.Metadata.Name, strings.Join(c.profile.Spec.Images.Allow, ", "))
	}
	rv, _ := rayVersion.(string)
	if i := strings.LastIndexByte(img, ':'); i >= 0 && rv != "" && !strings.Contains(img[i:], "/") {
		if m := imageVersion.FindString(img[i+1:]); m != "" && m != rv {
			c.add("/spec/cluster/image", "image tag says Ray %s but rayVersion is %q", m, rv)
		}
	}
}

// rayAuth refuses a Ray too old for the token authentication the profile
// asks for, and warns when the profile's default leaves it off for one.
func (c *checker) rayAuth(rayVersion any) {
	rv, ok := rayVersion.(string)
	if !ok || !versionBelow(rv, MinTokenAuthRayVersion) {
		return
	}
	switch c.profile.Spec.RayAuth.Mode {
	case RayAuthToken:
		c.add("/spec/cluster/rayVersion", "Ray %s has no token authentication, which profile %s turns on (spec.rayAuth.mode: token): use rayVersion %s or newer",
			rv, c.profile.Metadata.Name, MinTokenAuthRayVersion)
	case RayAuthDefault:
		c.warn("/spec/cluster/rayVersion", "warning: Ray %s has no token authentication: on KubeRay this cluster runs without it, "+
			"and anything that reaches its head service can submit jobs (use rayVersion %s or newer)", rv, MinTokenAuthRayVersion)
	}
}

// versionBelow reports whether the version a ("x.y.z") is older than b;
// a malformed a (the schema reports it) is not.
func versionBelow(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != 3 {
		return false
	}
	for i := range 3 {
		x, errA := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if errA != nil {
			return false
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func (c *checker) worker(base string, w map[string]any) {
	for _, k := range []string{"cpus", "memory"} {
		c.positiveQuantity(base+"/"+k, w[k])
	}
	gpus, hasGPUs := intOf(w["gpusPerWorker"])
	if t, ok := w["gpuType"].(string); ok && t != "" {
		c.gpuType(base, t, gpus, hasGPUs)
	} else if hasGPUs && gpus > 0 {
		c.add(base+"/gpusPerWorker", "needs a gpuType so raystep knows which GPU pool to use")
	}
	c.replicas(base, w)
}

func (c *checker) gpuType(base, t string, gpus int64, hasGPUs bool) {
	gt, ok := c.profile.Spec.GPUTypes[t]
	if !ok {
		known := make([]string, 0, len(c.profile.Spec.GPUTypes))
		for k := range c.profile.Spec.GPUTypes {
			known = append(known, k)
		}
		slices.Sort(known)
		c.add(base+"/gpuType", "unknown gpuType %q: profile %s has %s", t, c.profile.Metadata.Name, strings.Join(known, ", "))
		return
	}
	if hasGPUs && gt.MaxPerWorker > 0 && gpus > int64(gt.MaxPerWorker) {
		c.add(base+"/gpusPerWorker", "%d exceeds the %d %s GPUs a node has", gpus, gt.MaxPerWorker, t)
	}
}

func (c *checker) replicas(base string, w map[string]any) {
	r, hasR := intOf(w["replicas"])
	lo, hasLo := intOf(w["minReplicas"])
	hi, hasHi := intOf(w["maxReplicas"])
	switch {
	case hasLo && hasHi && lo > hi:
		c.add(base+"/minReplicas", "minReplicas %d is greater than maxReplicas %d", lo, hi)
	case hasR && hasLo && r < lo:
		c.add(base+"/replicas", "replicas %d is below minReplicas %d", r, lo)
	case hasR && hasHi && r > hi:
		c.add(base+"/replicas", "replicas %d is above maxReplicas %d", r, hi)
	}
	limit := int64(c.profile.Spec.Limits.MaxWorkersPerGroup)
	for _, k := range []string{"replicas", "maxReplicas"} {
		if n, ok := intOf(w[k]); ok && limit > 0 && n > limit {
			c.add(base+"/"+k, "%d exceeds the profile's maxWorkersPerGroup %d", n, limit)
		}
	}
}

func (c *checker) entrypointResources(v any, cluster map[string]any) {
	er, _ := v.(map[string]any)
	if m, ok := er["memory"]; ok {
		if _, msg := parseQuantity(m); msg != "" {
			c.add("/spec/entrypointResources/memory", "%s", msg)
		}
	}
	if g, ok := floatOf(er["gpus"]); ok && g > 0 && !anyGPUWorkers(cluster) {
		c.add("/spec/entrypointResources/gpus", "asks for %v GPUs but no worker group has GPUs", g)
	}
}

func anyGPUWorkers(cluster map[string]any) bool {
	workers, _ := cluster["workers"].([]any)
	for _, w := range workers {
		wm, _ := w.(map[string]any)
		if t, _ := wm["gpuType"].(string); t != "" {
			if n, ok := intOf(wm["gpusPerWorker"]); !ok || n > 0 {
				return true
			}
		}
	}
	return false
}

func (c *checker) timeouts(t map[string]any) {
	for _, k := range []string{"provision", "run", "ttlAfterFinished", "queue"} {
		if s, ok := t[k].(string); ok {
			if _, msg := parseDuration(s); msg != "" {
				c.add("/spec/timeouts/"+k, "%s", msg)
			}
		}
	}
	if qd, msg := parseDuration(durString(t["queue"])); msg == "" && qd > MaxQueueTimeout {
		c.add("/spec/timeouts/queue", "%s exceeds the longest queue wait raystep allows, %s", durString(t["queue"]), MaxQueueTimeout)
	}
	prov, run := or(durString(t["provision"]), defaultProvision), or(durString(t["run"]), defaultRun)
	pd, _ := parseDuration(prov)
	rd, _ := parseDuration(run)
	if pd > 0 && rd > 0 && pd >= rd {
		c.add("/spec/timeouts/provision", "provision (%s) must be shorter than run (%s), which also counts provisioning", prov, run)
	}
	if limit := c.profile.Spec.Limits.MaxRunTimeout; limit != "" {
		if ld, _ := parseDuration(limit); ld > 0 && rd > ld {
			c.add("/spec/timeouts/run", "%s exceeds the profile's maxRunTimeout %s", run, limit)
		}
	}
}

func durString(v any) string {
	s, _ := v.(string)
	return s
}

func (c *checker) positiveQuantity(ptr string, v any) {
	if v == nil {
		return
	}
	q, msg := parseQuantity(v)
	switch {
	case msg != "":
		c.add(ptr, "%s", msg)
	case q.IsZero():
		c.add(ptr, "must be greater than zero")
	}
}
