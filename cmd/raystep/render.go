package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

// renderOptions are render's flags.
type renderOptions struct {
	file, output, namespace string
	set                     []string
	identity                runner.Dagster
	assetKey                string
	// partitionKey, partitionRange and timeWindow preview a partitioned run.
	partitionKey, partitionRange, timeWindow string
}

func (a *app) renderCommand() *cobra.Command {
	var o renderOptions
	cmd := &cobra.Command{
		Use:   "render -f SPEC [-o yaml|json]",
		Short: "Print the KubeRay RayJob that run would create",
		Long: `render validates the spec and prints the ray.io/v1 RayJob that
"raystep run --backend kuberay" would create for it, byte for byte. The
Dagster flags preview the name and labels a given step attempt gets. When
the cluster gets Ray's token authentication (by default for Ray 2.52.0
and newer; the profile's spec.rayAuth.mode), the Secret run creates for
the token follows, without the token.
The partition flags substitute the ${RAYSTEP_PARTITION_...} variables as
a run for those partitions would; without them the variables stay as
written.`,
		Example: "  raystep render -f examples/ads_ranking/train.yaml --profile examples/platform.yaml -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.render(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "job spec to render, - for stdin (required)")
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml or json")
	namespaceFlag(f, &o.namespace, "", "namespace (default $RAYSTEP_NAMESPACE, the spec's, the profile's, then the kubeconfig's)")
	f.StringArrayVar(&o.set, "set", nil, "override a spec value, e.g. spec.timeouts.run=10m (repeatable)")
	f.StringVar(&o.identity.RunID, "dagster-run-id", "", "Dagster run id the RayJob belongs to")
	f.StringVar(&o.identity.StepKey, "step-key", "", "Dagster step key")
	f.IntVar(&o.identity.RetryNumber, "retry-number", 0, "Dagster retry number")
	f.StringVar(&o.assetKey, "asset-key", "", "Dagster asset key (parts joined with /)")
	f.StringVar(&o.partitionKey, "partition-key", "", "Dagster partition key the run targets")
	f.StringVar(&o.partitionRange, "partition-range", "", "Dagster partition key range START...END the run targets")
	f.StringVar(&o.timeWindow, "partition-time-window", "", "partition time window START...END (ISO 8601 with offset)")
	return cmd
}

func (a *app) render(cmd *cobra.Command, o renderOptions) error {
	if o.file == "" {
		return &usageError{errors.New("render: -f SPEC is required")}
	}
	if o.output != "yaml" && o.output != "json" {
		return &usageError{fmt.Errorf("render: -o %q: want yaml or json", o.output)}
	}
	profile, err := a.profile(cmd)
	if err != nil {
		return err
	}
	parts, err := o.partitions()
	if err != nil {
		return err
	}
	spec, err := schemas.LoadContext(cmd.Context(), o.file, schemas.LoadOptions{Set: o.set, Profile: profile, Stdin: a.stdin, Partitions: parts})
	if err != nil {
		return err
	}
	a.warn(spec.Warnings)
	if o.assetKey != "" {
		o.identity.AssetKeys = []string{o.assetKey}
	}
	names := kuberay.Namespaces{Flag: o.namespace, Env: a.cfg.Namespace,
		Spec: spec.Metadata.Namespace, Profile: profile.Namespace()}
	if names == (kuberay.Namespaces{}) {
		// Only now does the kubeconfig decide, as it would for run; render
		// reads its files but never talks to the API server.
		if names.Kubeconfig, err = kuberay.KubeconfigNamespace(a.connectOptions()); err != nil {
			return err // exit 3, as for run
		}
	}
	ns := kuberay.ResolveNamespace(names)
	job, err := kuberay.Build(spec, profile, previewStep(spec, ns, o.identity))
	if err != nil {
		return err
	}
	out, err := kuberay.EncodeWithSecret(job, o.output)
	if err != nil {
		return err
	}
	_, err = a.stdout.Write(out)
	return err
}

// firstNonEmpty returns the first non-empty string.
func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// partitions is the run the partition flags describe; nil without them.
func (o renderOptions) partitions() (*schemas.Partitions, error) {
	if o.partitionKey == "" && o.partitionRange == "" && o.timeWindow == "" {
		return nil, nil
	}
	var data pipes.ContextData
	if o.partitionKey != "" {
		data.PartitionKey = &o.partitionKey
	}
	if o.partitionRange != "" {
		start, end, ok := strings.Cut(o.partitionRange, "...")
		if !ok {
			return nil, &usageError{fmt.Errorf("--partition-range %q: want START...END", o.partitionRange)}
		}
		data.PartitionKeyRange = &pipes.PartitionKeyRange{Start: start, End: end}
	}
	if o.timeWindow != "" {
		start, end, ok := strings.Cut(o.timeWindow, "...")
		if !ok {
			return nil, &usageError{fmt.Errorf("--partition-time-window %q: want START...END", o.timeWindow)}
		}
		data.PartitionTimeWindow = &pipes.TimeWindow{Start: start, End: end}
	}
	p, err := adapters.PartitionsFrom(data)
	if err != nil {
		return nil, &usageError{err}
	}
	return p, nil
}

// previewStep is the step attempt `render` shows the RayJob of: the
// Dagster identity its flags name, exactly, in namespace ns. Nothing is
// made up: a standalone run's id is random, so no preview can know it.
func previewStep(spec *schemas.Spec, ns string, d runner.Dagster) runner.Step {
	name := spec.Metadata.Name
	d.StepKey = d.Key() // as runner.Resolve: the asset keys when no step key is given
	id := runner.StepID(name, d.RunID, d.StepKey, d.RetryNumber)
	return runner.Step{ID: id, Name: name, RunID: d.RunID, Namespace: ns, Dagster: d}
}
