package schemas

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SetSource starts the File of FieldErrors caused by --set overrides:
// "--set spec.timeouts.run=10x".
const SetSource = "--set"

// SetFile is the File of the FieldErrors an override s causes: "--set s",
// with s quoted (and cut) where printing it raw would put control
// characters or invalid UTF-8 on the user's terminal, or a page of it.
func SetFile(s string) string {
	printable := utf8.ValidString(s) && len(s) <= 200 && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
	if printable {
		return SetSource + " " + s
	}
	return SetSource + " " + quoteShort(s)
}

// ApplySet applies "path=value" overrides to a decoded document in place and
// returns it (a nil document becomes a map). A path is dotted keys into the
// document, with numbers indexing lists (spec.cluster.workers.0.replicas).
// A value is parsed as YAML ("3" is a number,
// "[a, b]" a list), except that it stays a string where the document holds a
// string or a map of strings (env_vars, labels, annotations), so
// --set spec.runtimeEnv.env_vars.THRESHOLD=0.75 sets "0.75". Missing maps on
// the way are created. Errors are FieldErrors with File "--set path=value".
func ApplySet(doc any, set []string) (any, error) {
	errs := &ValidationErrors{}
	if doc == nil {
		doc = map[string]any{}
	}
	for _, s := range set {
		path, value, ok := strings.Cut(s, "=")
		if !ok || path == "" {
			errs.Errors = append(errs.Errors, FieldError{File: SetFile(s), Pointer: "/",
				Message: "expected path=value, e.g. spec.timeouts.run=10m"})
			continue
		}
		if err := setPath(doc, strings.Split(path, "."), value); err != nil {
			errs.Errors = append(errs.Errors, FieldError{File: SetFile(s), Pointer: dottedPointer(path),
				Message: fmt.Sprintf("cannot set %q: %s", path, err)})
		}
	}
	if len(errs.Errors) > 0 {
		return doc, errs
	}
	return doc, nil
}

// stringMaps are keys whose values are maps of strings.
var stringMaps = map[string]bool{"env_vars": true, "labels": true, "annotations": true, "nodeSelector": true}

func setPath(node any, keys []string, raw string) error {
	for i, k := range keys {
		if k == "" {
			return fmt.Errorf("empty path element")
		}
		last := i == len(keys)-1
		switch n := node.(type) {
		case map[string]any:
			if last {
				n[k] = parseSetValue(raw, n[k], i > 0 && stringMaps[keys[i-1]])
				return nil
			}
			next, ok := n[k]
			if !ok || next == nil {
				next = map[string]any{}
				n[k] = next
			}
			node = next
		case []any:
			idx, err := strconv.Atoi(k)
			if err != nil || idx < 0 || idx >= len(n) {
				return fmt.Errorf("%q is not an index of a list of %d items", k, len(n))
			}
			if last {
				n[idx] = parseSetValue(raw, n[idx], false)
				return nil
			}
			node = n[idx]
		default:
			return fmt.Errorf("%q is not a map or list", strings.Join(keys[:i], "."))
		}
	}
	return nil
}

// parseSetValue reads raw as YAML unless the target is a string.
func parseSetValue(raw string, current any, inStringMap bool) any {
	if _, isString := current.(string); isString || inStringMap {
		return raw
	}
	tree, _, errs := decodeTree(SetSource, []byte(raw))
	if len(errs.Errors) > 0 {
		return raw
	}
	return tree
}

// blameSet records that the values of the overrides in set come from them,
// not from the file, so errors about them name the --set argument.
func blameSet(at positions, set []string) {
	for _, s := range set {
		path, _, ok := strings.Cut(s, "=")
		if !ok || path == "" {
			continue
		}
		ptr := dottedPointer(path)
		for p := range at {
			if strings.HasPrefix(p, ptr+"/") {
				delete(at, p)
			}
		}
		at[ptr] = pos{set: s}
	}
}

// dottedPointer turns a dotted path into a JSON pointer.
func dottedPointer(path string) string {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		parts[i] = escapeToken(p)
	}
	return "/" + strings.Join(parts, "/")
}
