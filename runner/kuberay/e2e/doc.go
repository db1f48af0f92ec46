// Package e2e tests the KubeRay backend end to end: whole raystep steps
// through runner.Runner against a real API server, scheduler, garbage
// collector, kwok nodes mirroring the example platform profile and the
// real KubeRay reconcilers (test/cluster), with Ray jobs running on a real
// local Ray head that both the operator and raystep reach by its URL.
// The package holds tests only.
package e2e
