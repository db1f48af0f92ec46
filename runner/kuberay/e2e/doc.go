// Package e2e tests the KubeRay backend end to end: whole raystep steps
// through runner.Runner against a real API server, scheduler, garbage
// collector, kwok nodes mirroring the example platform profile and the
// real KubeRay reconcilers (test/cluster), with Ray jobs running on a real
// local Ray head that the operator reaches by its URL, and raystep by its
// URL, through a port-forward to the head pod (which kwok sends to that
// head), or by the head service's DNS name from a mount namespace that
// looks like a pod.
// The package holds tests only.
package e2e
