// Command linkfloor does nothing but link the third-party packages whose
// package init raystep pays on every start (`GODEBUG=inittrace=1 raystep
// version` names them): client-go's clientset and kubeconfig loader,
// KubeRay's clientset and the JSON Schema library, which compiles every
// draft's metaschema in its init. Go runs the init of every linked
// package before main, used or not, so its start-up time, measured by
// test/bench/startup.sh as "floor", is the least any raystep command can
// take while one binary holds the KubeRay backend and the validator.
package main

import (
	_ "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/clientcmd"
)

func main() {}
