package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/schemas"
)

func (a *app) schemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:       "schema [jobspec|profile]",
		Short:     "Print the job-spec (or platform-profile) JSON Schema",
		Long:      "schema prints the JSON Schema (draft 2020-12) raystep validates job specs against, or with \"profile\" the platform-profile schema. Point your editor's YAML language server at it.",
		Example:   "  raystep schema > jobspec.schema.json",
		Args:      schemaArgs,
		ValidArgs: []string{"jobspec", "profile"},
		RunE: func(_ *cobra.Command, args []string) error {
			doc := schemas.JobSpecSchema()
			if len(args) == 1 && args[0] == "profile" {
				doc = schemas.ProfileSchema()
			}
			_, err := a.stdout.Write(doc)
			return err
		},
	}
}

// schemaArgs accepts at most one schema name and lists them all otherwise.
func schemaArgs(cmd *cobra.Command, args []string) error {
	want := strings.Join(cmd.ValidArgs, " or ")
	switch {
	case len(args) > 1:
		return &usageError{fmt.Errorf("schema: one schema at a time, got %q: want %s", args, want)}
	case len(args) == 1 && !slices.Contains(cmd.ValidArgs, args[0]):
		return &usageError{fmt.Errorf("schema: unknown schema %q: want %s", args[0], want)}
	}
	return nil
}
