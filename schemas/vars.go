package schemas

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
			v, ok := c.partitions.Values[t.name]
			if !ok {
				c.add(ptr, "${%s} is not defined for this run's partitions (%s); it defines %s",
					t.name, undefinedWhy(t.name), strings.Join(c.partitions.defined(), ", "))
				continue
			}
			if problem := valueProblem(ptr == "/spec/entrypoint", t.name, v); problem != "" {
				c.add(ptr, "${%s} is %s, %s", t.name, quoteShort(v), problem)
			}
		}
	}
}

// valueProblem says why a partition value cannot be substituted where it
// is used, "" when it can. Partition keys come from sensors, file names
// and people typing in the Dagster UI, so they are input, not spec.
//
// Into the entrypoint, which Ray runs with sh -c, only a value the shell
// reads as the plain word it is goes: quoting cannot make any other safe,
// since the entrypoint may hand its text to another shell (bash -c "...",
// eval, a here-document) that would read it again. The environment
// variable of the same name reaches the driver intact whatever it holds,
// when quoted ("$RAYSTEP_PARTITION_KEY").
//
// An env var value never meets a shell and may hold anything printable,
// but not a ".." path segment or a leading "/": such values are mostly
// used in paths (ADS_MODEL_DIR=/data/models/${RAYSTEP_PARTITION_KEY}),
// and a key must not move a path out of the directory the spec names.
func valueProblem(entrypoint bool, name, v string) string {
	if r, bad := valueControl(v, false); bad {
		return fmt.Sprintf("which holds the control character %U, which Ray and Kubernetes do not accept", r)
	}
	if len(v) > MaxPartitionValue {
		return fmt.Sprintf("longer than %s, raystep's limit for a partition value", kib(MaxPartitionValue))
	}
	if entrypoint {
		if v == "" {
			return "which the shell would drop from the command; " + useEnvVar(name)
		}
		for _, r := range v {
			if !shellPlain(r) {
				return fmt.Sprintf("which the shell would not read as one plain word (it holds %q); "+
					"raystep substitutes into the entrypoint only letters, digits and %s; %s", r, shellPlainPunct, useEnvVar(name))
			}
		}
		return ""
	}
	if strings.HasPrefix(v, "/") {
		return "which starts with \"/\": a partition value must not make a path absolute"
	}
	if slices.Contains(strings.Split(v, "/"), "..") {
		return "which holds a \"..\" path segment: a partition value must not lead a path out of its directory"
	}
	return ""
}

// quoteShort quotes v for a message, its first 80 bytes when longer.
func quoteShort(v string) string {
	if len(v) <= 80 {
		return strconv.Quote(v)
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", v[:cut], len(v))
}

// MaxPartitionValue is the longest partition value raystep substitutes:
// values travel inside the RayJob, whose size etcd limits.
const MaxPartitionValue = 4 << 10

// shellPlainPunct is the punctuation a value substituted into the
// entrypoint may hold: none of it means anything to sh in any position.
const shellPlainPunct = "_ . - : + @ , = % /"

// useEnvVar is the way out valueProblem's entrypoint messages name.
func useEnvVar(name string) string {
	return fmt.Sprintf(`use the environment variable instead, quoted: "$%s"`, name)
}

// shellPlain reports whether r means nothing to sh: a letter or digit
// (any script), or a shellPlainPunct character.
func shellPlain(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	case r < 0x80:
		return r != ' ' && strings.ContainsRune(shellPlainPunct, r)
	default:
		return unicode.IsLetter(r) || unicode.IsDigit(r)
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
