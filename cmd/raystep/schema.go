package main

import (
	"github.com/spf13/cobra"

	"github.com/raystep/raystep/schemas"
)

func (a *app) schemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:       "schema [jobspec|profile]",
		Short:     "Print the job-spec (or platform-profile) JSON Schema",
		Long:      "schema prints the JSON Schema (draft 2020-12) raystep validates job specs against, or with \"profile\" the platform-profile schema. Point your editor's YAML language server at it.",
		Example:   "  raystep schema > jobspec.schema.json",
		Args:      cobra.MatchAll(cobra.MaximumNArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"jobspec", "profile"},
		PreRun:    a.begin,
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
