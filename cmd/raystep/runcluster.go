package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// runClusterUsage documents --run-cluster, on run and validate alike.
const runClusterUsage = "cluster section shared by the run: replaces spec.cluster when spec.cluster.reuse is run " +
	"(a YAML file whose one key is cluster; default $RAYSTEP_RUN_CLUSTER)"

// addRunClusterFlag adds --run-cluster to flags, into file.
func addRunClusterFlag(flags *pflag.FlagSet, file *string) {
	flags.StringVar(file, "run-cluster", "", runClusterUsage)
}

// loadRunCluster reads the run cluster file named by --run-cluster (file)
// or RAYSTEP_RUN_CLUSTER; nil when neither names one.
func (a *app) loadRunCluster(ctx context.Context, file string) (*schemas.RunCluster, error) {
	if file == "" {
		file = a.cfg.RunCluster
	}
	if file == "" {
		return nil, nil
	}
	return schemas.LoadRunCluster(ctx, file)
}

// noteRunCluster tells the step where its cluster section came from when a
// run cluster file was given.
func noteRunCluster(step *runner.Step, spec *schemas.Spec, rc *schemas.RunCluster) {
	switch {
	case rc == nil:
	case spec.ClusterFile != "":
		step.Notices = append(step.Notices, fmt.Sprintf("the cluster section is the run's, from %s (spec.cluster.reuse is run): "+
			"the spec's own spec.cluster is not used", spec.ClusterFile))
	default:
		step.Notices = append(step.Notices, fmt.Sprintf("the run cluster file %s is not used: spec.cluster.reuse is %s, "+
			"so the step has a cluster of its own", rc.File, spec.Spec.Cluster.Reuse))
	}
}
