package schemas

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Completion is one way to go on with a --set argument being typed, and
// what the schema says of it.
type Completion struct {
	Text, Description string
}

// SetCompletions completes a --set argument being typed, from the job
// spec's schema: before the "=", the dotted paths that continue partial,
// one level at a time (a path to an object, or to a list of objects, which
// an index follows, ends with "."; a path to a value or a list of values
// with "="); after it, the
// values the field allows (an enum's, or true and false), when the schema
// names them. Nothing fits: none, and no error.
func SetCompletions(partial string) ([]Completion, error) {
	root, err := compiledJobSpec()
	if err != nil {
		return nil, err
	}
	if path, typed, ok := strings.Cut(partial, "="); ok {
		sch := walkSchema(root, strings.Split(path, "."))
		var out []Completion
		for _, v := range allowedValues(sch) {
			if strings.HasPrefix(v, typed) {
				out = append(out, Completion{Text: path + "=" + v})
			}
		}
		return out, nil
	}
	keys := strings.Split(partial, ".")
	parent, last := keys[:len(keys)-1], keys[len(keys)-1]
	sch := walkSchema(root, parent)
	if sch == nil {
		return nil, nil
	}
	prefix := strings.Join(parent, ".")
	if prefix != "" {
		prefix += "."
	}
	children := sch.Properties
	if sch.Items2020 != nil { // a list: its first item stands for any
		children = map[string]*jsonschema.Schema{"0": sch.Items2020}
	}
	var out []Completion
	for name, child := range children {
		if !strings.HasPrefix(name, last) {
			continue
		}
		child = followRef(child)
		next := "=" // a value; a list of values too: --set path=[a, b]
		if hasTypes(child, "object") || hasTypes(child, "array") && child.Items2020 != nil && len(followRef(child.Items2020).Properties) > 0 {
			next = "."
		}
		out = append(out, Completion{Text: prefix + name + next, Description: firstSentence(child.Description)})
	}
	slices.SortFunc(out, func(a, b Completion) int { return strings.Compare(a.Text, b.Text) })
	return out, nil
}

// walkSchema follows keys (numbers index lists) from sch; nil where the
// schema does not go.
func walkSchema(sch *jsonschema.Schema, keys []string) *jsonschema.Schema {
	for _, key := range keys {
		sch = followRef(sch)
		if sch == nil {
			return nil
		}
		if _, err := strconv.Atoi(key); err == nil && sch.Items2020 != nil {
			sch = sch.Items2020
			continue
		}
		sch = sch.Properties[key]
	}
	return followRef(sch)
}

// hasTypes says sch is a container of this JSON type (object or array)
// and nothing else: one that --set goes into rather than sets.
func hasTypes(sch *jsonschema.Schema, typ string) bool {
	switch {
	case sch == nil:
		return false
	case typ == "object" && len(sch.Properties) > 0, typ == "array" && sch.Items2020 != nil:
		return true
	}
	return sch.Types != nil && slices.Equal(sch.Types.ToStrings(), []string{typ})
}

// allowedValues are the values the schema lists for a field: its enum's
// (as --set writes them), or true and false for a boolean.
func allowedValues(sch *jsonschema.Schema) []string {
	switch {
	case sch == nil:
		return nil
	case sch.Enum != nil:
		var out []string
		for _, v := range sch.Enum.Values {
			out = append(out, fmt.Sprint(v))
		}
		return out
	case sch.Types != nil && slices.Equal(sch.Types.ToStrings(), []string{"boolean"}):
		return []string{"true", "false"}
	}
	return nil
}

// firstSentence is the start of a schema description, up to its first
// full stop, for a completion's one line.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], ". ")
		if j < 0 {
			break
		}
		if end := s[:i+j]; strings.HasSuffix(end, "e.g") || strings.HasSuffix(end, "i.e") {
			i += j + 2 // an abbreviation, not the sentence's end
			continue
		}
		s = s[:i+j]
		break
	}
	s = strings.TrimSuffix(s, ".")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:79]) + "…"
	}
	return s
}
