package schemas

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed jobspec.schema.json
var jobSpecSchema []byte

//go:embed profile.schema.json
var profileSchema []byte

const (
	jobSpecURL = "https://raystep.dev/schemas/v1alpha1/jobspec.schema.json"
	profileURL = "https://raystep.dev/schemas/v1alpha1/profile.schema.json"
)

// JobSpecSchema returns the job-spec JSON Schema (draft 2020-12) as embedded
// in the binary. The returned slice is a copy.
func JobSpecSchema() []byte { return bytes.Clone(jobSpecSchema) }

// ProfileSchema returns the platform-profile JSON Schema (draft 2020-12).
// The returned slice is a copy.
func ProfileSchema() []byte { return bytes.Clone(profileSchema) }

// compiledJobSpec and compiledProfile are the embedded schemas, each
// compiled once per process on its first use and not before: compiling
// checks the document against the draft 2020-12 metaschema, work that
// `raystep version` and `raystep schema` never need and `validate` needs
// for the job spec only. The embedded documents never change, so these
// are caches, not mutable state.
var (
	compiledJobSpec = sync.OnceValues(func() (*jsonschema.Schema, error) {
		return compileEmbedded("job-spec", jobSpecURL, jobSpecSchema)
	})
	compiledProfile = sync.OnceValues(func() (*jsonschema.Schema, error) {
		return compileEmbedded("profile", profileURL, profileSchema)
	})
)

// compileEmbedded compiles the embedded schema document data, known by url.
func compileEmbedded(what, url string, data []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse embedded schema %s: %w", url, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("add embedded schema %s: %w", url, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile %s schema: %w", what, err)
	}
	return sch, nil
}

// english prints the schema library's messages.
var english = message.NewPrinter(language.English)

// validateSchema checks tree against sch and records one FieldError per leaf
// problem. It returns an error only if validation itself broke.
func validateSchema(sch *jsonschema.Schema, file string, tree any, pos positions, errs *ValidationErrors) error {
	err := sch.Validate(tree)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("validate %s: %w", file, err)
	}
	c := &collector{root: sch, file: file, pos: pos, errs: errs}
	c.collect(ve)
	return nil
}

// collector turns a schema error tree into FieldErrors.
type collector struct {
	root *jsonschema.Schema
	file string
	pos  positions
	errs *ValidationErrors
}

// collect walks the error tree and keeps the leaves, which name the actual
// problem; groups like anyOf are reported once at their own location.
func (c *collector) collect(ve *jsonschema.ValidationError) {
	file, pos, errs := c.file, c.pos, c.errs
	ptr := pointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		errs.add(file, pos, ptr, "does not match any of the allowed forms")
		return
	case *kind.Not:
		if strings.HasSuffix(ptr, "/runtimeEnv") {
			errs.add(file, pos, ptr+"/working_dir", "unknown key \"working_dir\": set spec.workingDir instead")
			return
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			if s := suggestKey(c.root, ve.InstanceLocation, p); s != "" {
				errs.add(file, pos, join(ptr, p), "unknown key %q (did you mean %q?)", p, s)
				continue
			}
			errs.add(file, pos, join(ptr, p), "unknown key %q", p)
		}
		return
	case *kind.Required:
		for _, p := range k.Missing {
			errs.add(file, pos, join(ptr, p), "required key %q is missing", p)
		}
		return
	}
	if len(ve.Causes) > 0 {
		for _, cause := range ve.Causes {
			c.collect(cause)
		}
		return
	}
	errs.add(file, pos, ptr, "%s", describe(ve.ErrorKind))
}

// describe words a leaf schema error for the people who write specs.
func describe(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Pattern:
		if hint, ok := patternHints[k.Want]; ok {
			return fmt.Sprintf("%q is not %s", k.Got, hint)
		}
		return fmt.Sprintf("%q does not match %s", k.Got, k.Want)
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d item(s), got %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters, got %d", k.Want, k.Got)
	case *kind.Enum:
		if s := suggestValue(k.Got, k.Want); s != "" {
			return fmt.Sprintf("%s (did you mean %q?)", k.LocalizedString(english), s)
		}
	}
	return k.LocalizedString(english)
}

// patternHints names the patterns the schemas use.
var patternHints = map[string]string{
	`^[a-z]([-a-z0-9]*[a-z0-9])?$`:               "a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, ending with a letter or digit)",
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`:            "a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit)",
	`^[0-9]+\.[0-9]+\.[0-9]+$`:                   "a Ray version like \"2.60.0\" (quote it in YAML)",
	`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`: "a valid label value (letters, digits, '-', '_', '.')",
	`^[A-Za-z_][A-Za-z0-9_]*$`:                   "an environment variable name (letters, digits and '_', not starting with a digit)",
	`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`:           "a Secret name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)",
	`^[-._a-zA-Z0-9]+$`:                          "a key of a Secret (letters, digits, '-', '_' and '.')",
}

// pointer builds a JSON pointer from unescaped tokens; "/" is the root.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

// join appends one unescaped token to a pointer.
func join(ptr, token string) string {
	if ptr == "/" {
		ptr = ""
	}
	return ptr + "/" + escapeToken(token)
}
