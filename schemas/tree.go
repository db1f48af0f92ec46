package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// pos is a 1-based source position, or the --set override a value came
// from.
type pos struct {
	line, column int
	// set is the "path=value" argument that set the value; "" for the file.
	set string
	// file is the file the value came from when it is not the spec's own
	// (a run cluster file, see RunCluster); trim is the start of the
	// value's pointer that file does not have.
	file, trim string
}

// positions maps JSON pointers to where their value starts in the source.
type positions map[string]pos

// at returns the position of pointer, or of its closest known ancestor.
func (p positions) at(pointer string) pos {
	for {
		if q, ok := p[pointer]; ok {
			return q
		}
		i := strings.LastIndexByte(pointer, '/')
		if i <= 0 {
			return p["/"]
		}
		pointer = pointer[:i]
	}
}

// yamlLine finds the line in a go-yaml syntax error ("yaml: line 7: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeTree parses one YAML (or JSON) document into plain Go values (maps,
// slices, strings, json.Number, bools, nil) and records where each value
// starts. Syntax problems are returned as FieldErrors.
func decodeTree(file string, data []byte) (any, positions, *ValidationErrors) {
	errs := &ValidationErrors{}
	pos := positions{}
	msg := tooLarge(data, int64(len(data)))
	if len(data) <= MaxFileBytes {
		msg = textProblem(data)
	}
	if msg != "" {
		errs.add(file, pos, "/", "%s", msg)
		return nil, pos, errs
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if err == nil && len(doc.Content) == 0 {
		err = io.EOF
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			errs.add(file, pos, "/", "the file is empty; expected one document")
			return nil, pos, errs
		}
		errs.Errors = append(errs.Errors, syntaxError(file, err))
		return nil, nil, errs
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		errs.Errors = append(errs.Errors, FieldError{File: file, Pointer: "/", Line: extra.Line, Column: extra.Column,
			Message: fmt.Sprintf("line %d: a second YAML document; put one spec in each file", extra.Line)})
		return nil, nil, errs
	case !errors.Is(err, io.EOF):
		errs.Errors = append(errs.Errors, syntaxError(file, err))
		return nil, nil, errs
	}
	d := &treeDecoder{file: file, pos: pos, errs: errs}
	v := d.node(doc.Content[0], "")
	return v, pos, errs
}

// tooDeep is the message for nesting deeper than MaxDepth.
var tooDeep = fmt.Sprintf("the spec nests deeper than %d levels; raystep reads at most %[1]d", MaxDepth)

// syntaxError turns a go-yaml error into a FieldError with its line.
func syntaxError(file string, err error) FieldError {
	fe := FieldError{File: file, Pointer: "/", Message: strings.TrimPrefix(err.Error(), "yaml: ")}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		msg := m[2]
		if strings.HasPrefix(msg, "exceeded max depth") {
			msg = tooDeep // go-yaml's own limit is far above ours
		}
		fe.Message = fmt.Sprintf("line %s: %s", m[1], msg)
	}
	return fe
}

// treeDecoder turns yaml.Nodes into plain values, expanding aliases within
// the budget of MaxDepth, MaxValues and MaxExpandedBytes: past it, decoding
// stops with one error, so an alias bomb costs no more than a large file.
type treeDecoder struct {
	file string
	pos  positions
	errs *ValidationErrors
	// depth, values and bytes are spent so far; over is set once the
	// budget ran out.
	depth, values, bytes int
	over                 bool
	// alias is the outermost alias being expanded, nil outside one.
	alias *yaml.Node
}

func (d *treeDecoder) node(n *yaml.Node, ptr string) any {
	key := ptrOr(ptr)
	if d.over || !d.spend(n, key) {
		return nil
	}
	d.pos[key] = pos{line: n.Line, column: n.Column}
	switch n.Kind {
	case yaml.AliasNode:
		if d.alias == nil {
			d.alias = n
			defer func() { d.alias = nil }()
		}
		return d.node(n.Alias, ptr)
	case yaml.MappingNode:
		d.depth++
		defer func() { d.depth-- }()
		return d.mapping(n, ptr)
	case yaml.SequenceNode:
		d.depth++
		defer func() { d.depth-- }()
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			out[i] = d.node(c, ptr+"/"+strconv.Itoa(i))
		}
		return out
	case yaml.ScalarNode:
		return d.scalar(n, key)
	}
	d.errs.add(d.file, d.pos, key, "unsupported YAML node")
	return nil
}

func (d *treeDecoder) mapping(n *yaml.Node, ptr string) any {
	out := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			d.errs.add(d.file, d.pos, ptrOr(ptr), "line %d: YAML merge keys (<<) are not supported", k.Line)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errs.add(d.file, d.pos, ptrOr(ptr), "line %d: mapping keys must be strings", k.Line)
			continue
		}
		child := ptr + "/" + escapeToken(k.Value)
		if r, bad := valueControl(k.Value, true); bad {
			d.pos[child] = pos{line: k.Line, column: k.Column}
			d.errs.add(d.file, d.pos, child, keyControlFormat, r)
			continue
		}
		d.bytes += len(k.Value)
		if _, dup := out[k.Value]; dup {
			d.pos[child] = pos{line: k.Line, column: k.Column}
			d.errs.add(d.file, d.pos, child, "duplicate key %q", k.Value)
			continue
		}
		out[k.Value] = d.node(v, child)
		// Point at the key, which is where a reader looks for it.
		d.pos[child] = pos{line: k.Line, column: k.Column}
	}
	return out
}

// spend charges one value to the budget and reports whether it was left.
func (d *treeDecoder) spend(n *yaml.Node, ptr string) bool {
	d.values++
	if n.Kind == yaml.ScalarNode {
		d.bytes += len(n.Value)
	}
	var msg string
	switch {
	case d.depth >= MaxDepth && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode):
		msg = tooDeep
	case d.values > MaxValues:
		msg = fmt.Sprintf("the spec holds more than %d values; raystep reads at most %[1]d", MaxValues)
	case d.bytes > MaxExpandedBytes:
		msg = fmt.Sprintf("the spec holds more than %s of text; raystep reads at most %[1]s", kib(MaxExpandedBytes))
	default:
		return true
	}
	if d.alias != nil {
		msg = fmt.Sprintf("line %d: alias *%s repeats so much that %s (each use of an alias counts its whole value again)",
			d.alias.Line, d.alias.Value, msg)
	}
	d.over = true
	d.pos[ptr] = pos{line: n.Line, column: n.Column}
	d.errs.add(d.file, d.pos, ptr, "%s", msg)
	return false
}

func (d *treeDecoder) scalar(n *yaml.Node, ptr string) any {
	if r, bad := valueControl(n.Value, false); bad {
		d.errs.add(d.file, d.pos, ptr, valueControlFormat, r)
		return nil
	}
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return b
		}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
		d.errs.add(d.file, d.pos, ptr, "%q is not a finite number", n.Value)
		return nil
	}
	return n.Value
}

// ptrOr returns ptr, or "/" for the document root.
func ptrOr(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return ptr
}

// escapeToken escapes one JSON pointer reference token (RFC 6901).
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
