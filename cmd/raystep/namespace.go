package main

import (
	"errors"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// namespaceValue is a --namespace flag: a Kubernetes namespace name,
// checked as the flag is parsed, so that a bad one is a usage error
// (exit 2) before anything is created or asked of the API server. Empty
// is no namespace: the next in kuberay.ResolveNamespace's order counts.
type namespaceValue struct{ p *string }

func (v namespaceValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v namespaceValue) Set(s string) error {
	if err := checkNamespace(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// Type is what the help shows after the flag's name.
func (namespaceValue) Type() string { return "string" }

// namespaceFlag adds --namespace (and -short, unless empty) to f.
func namespaceFlag(f *pflag.FlagSet, p *string, short, usage string) {
	f.VarP(namespaceValue{p}, "namespace", short, usage)
}

// checkNamespace says what is wrong with ns as a namespace's name; ""
// passes (no namespace).
func checkNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return errors.New("want a Kubernetes namespace name: at most 63 lowercase letters, digits and '-', " +
			"starting and ending with a letter or digit")
	}
	return nil
}
