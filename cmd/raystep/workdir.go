package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/schemas"
)

// checkWorkingDir walks the spec's working dir as its package would be
// built, so that a missing, unreadable, looping or oversized one, or a bad
// exclude pattern, is a validation error of file (exit 2) before anything
// is created.
func checkWorkingDir(ctx context.Context, file string, spec *schemas.Spec) error {
	js := spec.Spec
	if js.WorkingDir == "" {
		return nil
	}
	_, err := raysubmit.CheckWorkingDir(ctx, js.WorkingDir, raysubmit.PackageOptions{Excludes: excludesOf(js.RuntimeEnv)})
	var wde *raysubmit.WorkingDirError
	if !errors.As(err, &wde) {
		return err // nil, or the step was cancelled
	}
	if file == "-" {
		file = schemas.StdinName
	}
	fe := schemas.FieldError{File: file, Pointer: "/spec/workingDir", Message: wde.Error()}
	var pe *raysubmit.PatternError
	if errors.As(err, &pe) && pe.File == "" {
		fe.Pointer = fmt.Sprintf("/spec/runtimeEnv/excludes/%d", pe.Index)
		fe.Message = fmt.Sprintf("%q: %v", pe.Pattern, pe.Err)
	}
	return &schemas.ValidationErrors{Errors: []schemas.FieldError{fe}}
}

// excludesOf returns runtime_env's excludes, gitignore patterns the
// schema has checked are strings.
func excludesOf(env map[string]any) []string {
	list, _ := env["excludes"].([]any)
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
