// Package kuberay is raystep's KubeRay backend. This file set holds the
// RayJob builder: it turns a validated schemas.Spec and the platform profile
// into the exact ray.io/v1 RayJob that `raystep render` prints and `raystep
// run --backend kuberay` creates. Talking to the API server, watching and
// garbage collection live beside it; loading and validating specs is left to
// package schemas.
package kuberay
