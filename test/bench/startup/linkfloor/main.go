// Command linkfloor does nothing but link the third-party packages whose
// package init raystep pays on every start (`GODEBUG=inittrace=1 raystep
// version` names them): the Kubernetes REST client and kubeconfig loader,
// the API types raystep's KubeRay backend uses (core, coordination,
// authorization, authentication and KubeRay's ray.io/v1, through
// runner/kuberay/kubeapi, which links no clientset), and the JSON Schema
// library, which compiles every draft's metaschema in its init. Go runs
// the init of every linked package before main, used or not, so its
// start-up time, measured by test/bench/startup.sh as "floor", is the least
// any raystep command can take while one binary holds the KubeRay backend
// and the validator.
package main

import (
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "k8s.io/client-go/tools/clientcmd"

	_ "github.com/raystep/raystep/runner/kuberay/kubeapi"
)

func main() {}
