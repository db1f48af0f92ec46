package schemas

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The variables raystep defines for a step that Dagster runs for
// partitions. A spec uses them as ${NAME} in spec.entrypoint and in the
// values of spec.runtimeEnv.env_vars, and the Ray job gets each defined one
// as an environment variable of the same name.
const (
	// VarPartitionKey is the one partition key of the run; undefined when
	// the run targets a range of several partitions.
	VarPartitionKey = "RAYSTEP_PARTITION_KEY"
	// VarPartitionKeyRangeStart and VarPartitionKeyRangeEnd bound the
	// inclusive range of partition keys; both are the key for one partition.
	VarPartitionKeyRangeStart = "RAYSTEP_PARTITION_KEY_RANGE_START"
	VarPartitionKeyRangeEnd   = "RAYSTEP_PARTITION_KEY_RANGE_END"
	// VarPartitionTimeWindowStart and VarPartitionTimeWindowEnd are the
	// time window of the partitions in RFC 3339 (end exclusive), defined
	// only for time-partitioned assets.
	VarPartitionTimeWindowStart = "RAYSTEP_PARTITION_TIME_WINDOW_START"
	VarPartitionTimeWindowEnd   = "RAYSTEP_PARTITION_TIME_WINDOW_END"
)

// varName is the form of a variable's name.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// VarPrefix starts every variable raystep substitutes: ${NAME} with another
// name is left untouched for the shell.
const VarPrefix = "RAYSTEP_"

// Vars are the names raystep defines, in documentation order.
var Vars = []string{
	VarPartitionKey, VarPartitionKeyRangeStart, VarPartitionKeyRangeEnd,
	VarPartitionTimeWindowStart, VarPartitionTimeWindowEnd,
}

// Partitions is what a run knows of the Dagster partitions it targets:
// the values of the Vars it defines. Its zero value is a run without
// partitions (standalone, or an unpartitioned asset).
type Partitions struct {
	// Values maps each defined variable to its value.
	Values map[string]string
}

// Partitioned reports whether the run targets partitions.
func (p *Partitions) Partitioned() bool { return len(p.Values) > 0 }

// token is one piece of a string with references: a literal, or a ${NAME}
// reference (name set), or an unterminated ${RAYSTEP_ (bad set).
type token struct {
	lit, name string
	bad       bool
}

// tokenize splits s at raystep's references. "$${" is a literal "${" (so
// "$${RAYSTEP_PARTITION_KEY}" reaches the shell as "${RAYSTEP_PARTITION_KEY}");
// "${" followed by VarPrefix starts a reference that ends at the next "}";
// everything else is literal.
func tokenize(s string) []token {
	var toks []token
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			toks = append(toks, token{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"+VarPrefix):
			end := strings.IndexByte(s[i:], '}')
			flush()
			if end < 0 {
				toks = append(toks, token{lit: s[i:], bad: true})
				return toks
			}
			toks = append(toks, token{lit: s[i : i+end+1], name: s[i+2 : i+end]})
			i += end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	flush()
	return toks
}

// checkRefs reports the problems of the references in s, the value at ptr:
// an unterminated reference, a name raystep does not define, and, when the
// run is known (p not nil), a variable the run leaves undefined.
func (c *checker) checkRefs(ptr, s string) {
	for _, t := range tokenize(s) {
		switch {
		case t.bad:
			c.add(ptr, "%q starts a raystep variable but has no closing }; write $${ for a literal ${", t.lit)
		case t.name == "":
		case !varName.MatchString(t.name):
			c.add(ptr, "%q: raystep's variables are written ${NAME}, without shell operators; "+
				"write $${ to leave it to the shell", t.lit)
		case !slices.Contains(Vars, t.name):
			msg := fmt.Sprintf("unknown variable ${%s}: raystep defines %s", t.name, strings.Join(Vars, ", "))
			if near := nearestVar(t.name); near != "" {
				msg += fmt.Sprintf(" (did you mean ${%s}?)", near)
			}
			c.add(ptr, "%s; write $${ for a literal ${", msg)
		case c.partitions == nil:
		case !c.partitions.Partitioned():
			c.add(ptr, "${%s} is defined only when Dagster runs the step for a partition, and this run has no partition "+
				"(run it from a partitioned asset, or remove the variable)", t.name)
		default:
			if _, ok := c.partitions.Values[t.name]; !ok {
				c.add(ptr, "${%s} is not defined for this run's partitions (%s); it defines %s",
					t.name, undefinedWhy(t.name), strings.Join(c.partitions.defined(), ", "))
			}
		}
	}
}

// undefinedWhy says why a partitioned run leaves name undefined.
func undefinedWhy(name string) string {
	if name == VarPartitionKey {
		return "the run targets a range of several partitions"
	}
	return "they are not time windows"
}

// defined lists the variables p defines, in Vars order.
func (p *Partitions) defined() []string {
	var names []string
	for _, n := range Vars {
		if _, ok := p.Values[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// nearestVar is the defined variable closest to name, "" when none is close.
func nearestVar(name string) string {
	best, bestDist := "", 4
	for _, v := range Vars {
		if d := distance(name, v); d < bestDist {
			best, bestDist = v, d
		}
	}
	return best
}

// substitute replaces raystep's references in s with their values; s was
// checked, so every reference is defined.
func (p *Partitions) substitute(s string) string {
	var b strings.Builder
	for _, t := range tokenize(s) {
		if t.name != "" {
			b.WriteString(p.Values[t.name])
			continue
		}
		b.WriteString(t.lit)
	}
	return b.String()
}

// vars checks the references of the spec's entrypoint and env_vars values,
// and that env_vars does not set raystep's own variables.
func (c *checker) vars(spec map[string]any) {
	if ep, ok := spec["entrypoint"].(string); ok {
		c.checkRefs("/spec/entrypoint", ep)
	}
	renv, _ := spec["runtimeEnv"].(map[string]any)
	env, _ := renv["env_vars"].(map[string]any)
	for k, v := range env {
		ptr := "/spec/runtimeEnv/env_vars/" + escapeToken(k)
		if slices.Contains(Vars, k) {
			c.add(ptr, "%s is set by raystep from the Dagster partition and cannot be set here; "+
				"use ${%s} in another variable's value instead", k, k)
			continue
		}
		if s, ok := v.(string); ok {
			c.checkRefs(ptr, s)
		}
	}
}

// applyPartitions substitutes p in the entrypoint and the env_vars values,
// and adds p's variables to env_vars.
func (js *JobSpec) applyPartitions(p *Partitions) {
	js.Entrypoint = p.substitute(js.Entrypoint)
	if !p.Partitioned() && !hasEnvVars(js.RuntimeEnv) {
		return
	}
	if js.RuntimeEnv == nil {
		js.RuntimeEnv = map[string]any{}
	}
	old, _ := js.RuntimeEnv["env_vars"].(map[string]any)
	env := make(map[string]any, len(old)+len(p.Values))
	for k, v := range old {
		if s, ok := v.(string); ok {
			v = p.substitute(s)
		}
		env[k] = v
	}
	for k, v := range p.Values {
		env[k] = v
	}
	js.RuntimeEnv["env_vars"] = env
}

func hasEnvVars(renv map[string]any) bool {
	_, ok := renv["env_vars"].(map[string]any)
	return ok
}
