package kuberay

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// refused reports whether the API server turned a request down for who
// raystep is rather than for what it asked: a permission its Role lacks
// (Forbidden: the API server's message names the verb, the resource with
// its API group and the namespace) or credentials it does not accept.
// Asking again does not help, so raystep fails the step (or ls, or gc)
// with that message instead of degrading or retrying: every rule of
// examples/k8s/rbac.yaml is something a step cannot be trusted without.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}
