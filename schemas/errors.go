package schemas

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// FieldError is one problem found in a spec or profile, located by file and
// JSON pointer (and by line and column when the YAML source is known).
type FieldError struct {
	// File is the path as the user gave it, or "--set path=value" for a
	// value that override set.
	File string
	// Pointer is the RFC 6901 JSON pointer of the value; "/" for the document.
	Pointer string
	// Line and Column are 1-based source positions; 0 when unknown.
	Line, Column int
	// Message says what is wrong and what was expected.
	Message string
}

// Error formats the error as "FILE: /json/pointer: message", or as
// "FILE: message" when it is about the whole file.
func (e FieldError) Error() string {
	if e.Pointer == "/" || e.Pointer == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Message)
	}
	pointer := e.Pointer
	if strings.ContainsFunc(pointer, func(r rune) bool { return !unicode.IsPrint(r) }) {
		pointer = strconv.Quote(pointer) // a key with a control character: not raw on a terminal
	}
	return fmt.Sprintf("%s: %s: %s", e.File, pointer, e.Message)
}

// ValidationErrors is every problem found while loading one or more files.
// Callers pick it with errors.As: it means bad input, nothing was created.
type ValidationErrors struct {
	// Errors holds one entry per problem, sorted by file, line and column,
	// then pointer.
	Errors []FieldError
}

// Error prints one FieldError per line.
func (v *ValidationErrors) Error() string {
	lines := make([]string, len(v.Errors))
	for i, e := range v.Errors {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// add records a problem at pointer, looking up its source position; a
// value a --set override gave is blamed on that override.
func (v *ValidationErrors) add(file string, pos positions, pointer, format string, args ...any) {
	p := pos.at(pointer)
	switch {
	case p.set != "":
		file = SetFile(p.set)
	case p.file != "":
		file, pointer = p.file, strings.TrimPrefix(pointer, p.trim)
	}
	v.Errors = append(v.Errors, FieldError{
		File: file, Pointer: pointer, Line: p.line, Column: p.column,
		Message: fmt.Sprintf(format, args...),
	})
}

// sort orders errors by source position, then pointer, and drops duplicates.
func (v *ValidationErrors) sort() {
	slices.SortStableFunc(v.Errors, func(a, b FieldError) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column), cmp.Compare(a.Pointer, b.Pointer))
	})
	v.Errors = slices.Compact(v.Errors)
}

// orNil returns v when it holds errors, nil otherwise.
func (v *ValidationErrors) orNil() error {
	if len(v.Errors) == 0 {
		return nil
	}
	v.sort()
	return v
}
