package schemas

import (
	"iter"
	"maps"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// suggestKey proposes a known key close to an unknown one, found by walking
// the compiled schema along the instance pointer; "" when none is close.
func suggestKey(root *jsonschema.Schema, instance []string, unknown string) string {
	sch := root
	for _, tok := range instance {
		sch = followRef(sch)
		if sch == nil {
			return ""
		}
		if _, err := strconv.Atoi(tok); err == nil && sch.Items2020 != nil {
			sch = sch.Items2020
			continue
		}
		sch = sch.Properties[tok]
	}
	sch = followRef(sch)
	if sch == nil {
		return ""
	}
	return closest(unknown, maps.Keys(sch.Properties))
}

// suggestValue proposes the allowed value of an enum closest to a string
// that is none of them; "" when none is close or got is not a string.
func suggestValue(got any, allowed []any) string {
	s, ok := got.(string)
	if !ok {
		return ""
	}
	return closest(s, func(yield func(string) bool) {
		for _, a := range allowed {
			if w, ok := a.(string); ok && !yield(w) {
				return
			}
		}
	})
}

// closest is the candidate nearest to s, ignoring case, within an edit
// distance of 2 (ties go to the first in sort order); "" when none is.
func closest(s string, candidates iter.Seq[string]) string {
	best, bestDist := "", 3
	for name := range candidates {
		if d := distance(strings.ToLower(s), strings.ToLower(name)); d < bestDist || d == bestDist && name < best {
			best, bestDist = name, d
		}
	}
	return best
}

// followRef follows $ref.
func followRef(s *jsonschema.Schema) *jsonschema.Schema {
	for s != nil && s.Ref != nil {
		s = s.Ref
	}
	return s
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
