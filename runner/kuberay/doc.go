// Package kuberay is raystep's KubeRay backend: each step's Ray cluster is
// one ray.io/v1 RayJob in InteractiveMode.
//
// Build turns a validated schemas.Spec and the platform profile (the
// cluster's description) and a resolved runner.Step (its name, namespace
// and Dagster identity) into the exact RayJob that `raystep render` prints
// and `raystep run --backend kuberay` creates (labels for owner, kind and
// the Dagster step; deadlines from spec.timeouts; KubeRay's TTL under every
// teardown policy). ResolveNamespace is the one namespace precedence of
// run, render, ls and gc.
//
// Backend implements runner.Backend. Provision creates the RayJob under
// the step's deterministic name, or re-attaches to the one a killed
// attempt of the same step left, and with Ray's token authentication the
// Secret holding the cluster's token (auth.go). From then until Teardown, one watch each
// on the RayJob, its pods and the namespace's warning events (list once,
// then watch; never polling) feeds Ready, which waits for KubeRay's
// Waiting and fails fast with a *ClusterError on ValidationFailed,
// deadlines, Unschedulable, ImagePullBackOff and CrashLoopBackOff pods;
// Failures, which reports the same while the job runs; and Teardown, which
// deletes the RayJob in the foreground and waits until it, its RayCluster
// and its pods are gone. The dashboard is reached by an explicit URL, the
// head service's DNS name inside a pod, or a client-go port-forward.
// While the step runs it renews a heartbeat Lease owned by its RayJob
// (heartbeat.go), so that gc can tell a live step from a killed one.
//
// ListRayJobs, Summarize, ListLeases, Judge and Collect are `raystep ls`
// and `raystep gc`. Loading and validating specs is left to package schemas, the step's
// phases to package runner, the Jobs API to package raysubmit.
package kuberay
