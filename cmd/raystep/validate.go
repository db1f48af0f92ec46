package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/schemas"
)

func (a *app) validateCommand() *cobra.Command {
	var files, set []string
	var runCluster string
	cmd := &cobra.Command{
		Use:   "validate -f SPEC [-f SPEC]...",
		Short: "Check job specs against the schema and the platform profile",
		Long: `validate checks each spec against the job-spec schema, Kubernetes naming and
quantity rules, the platform profile (GPU types, allowed images) and raystep's
size limits (see schemas/SPEC.md). Every problem is printed, one per line, as
"FILE: /json/pointer: message"; the exit code is 2 when any spec is invalid.
"-f -" reads the spec from stdin, named <stdin> in errors; its relative
workingDir is then relative to the current directory. With --run-cluster
(or $RAYSTEP_RUN_CLUSTER) a spec whose spec.cluster.reuse is run is checked
with the run's cluster section instead of its own, as run would use it:
problems with that file name it, and a driver (spec.entrypointResources)
that fits no node of it is an error.`,
		Example: "  raystep validate -f examples/ads_ranking/train.yaml -f examples/ads_ranking/eval.yaml\n" +
			"  raystep validate --run-cluster examples/ads_ranking/run_cluster.yaml --set spec.cluster.reuse=run -f train.yaml -f eval.yaml\n" +
			"  raystep validate -f - < train.yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return &usageError{errors.New("validate: at least one -f SPEC is required")}
			}
			profile, err := a.profile(cmd)
			if err != nil {
				return err
			}
			rc, err := a.loadRunCluster(cmd.Context(), runCluster)
			if err != nil {
				return err
			}
			return a.validate(cmd.Context(), files, schemas.LoadOptions{Set: set, Profile: profile, Stdin: a.stdin, RunCluster: rc})
		},
	}
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "job spec to check, - for stdin (repeatable)")
	cmd.Flags().StringArrayVar(&set, "set", nil, "override a spec value, e.g. spec.timeouts.run=10m (repeatable)")
	addRunClusterFlag(cmd.Flags(), &runCluster)
	return cmd
}

// validate loads every file with opts and reports all problems of all
// files together.
func (a *app) validate(ctx context.Context, files []string, opts schemas.LoadOptions) error {
	all := &schemas.ValidationErrors{}
	a.warn(opts.Profile.Warnings())
	for _, f := range files {
		spec, err := schemas.LoadContext(ctx, f, opts)
		if err == nil {
			err = adapters.CheckWorkingDir(ctx, f, spec)
		}
		var ve *schemas.ValidationErrors
		switch {
		case errors.As(err, &ve):
			all.Errors = append(all.Errors, ve.Errors...)
		case err != nil:
			return fmt.Errorf("validate %s: %w", f, err)
		case f == "-":
			fmt.Fprintf(a.stdout, "%s: ok\n", schemas.StdinName)
		default:
			fmt.Fprintf(a.stdout, "%s: ok\n", f)
		}
		if spec != nil && err == nil {
			a.warn(spec.Warnings)
		}
	}
	if len(all.Errors) > 0 {
		return all
	}
	return nil
}

// warn prints warnings on stderr, one per line, as errors are printed.
func (a *app) warn(warnings []schemas.FieldError) {
	for _, w := range warnings {
		fmt.Fprintln(a.stderr, w.Error())
	}
}
