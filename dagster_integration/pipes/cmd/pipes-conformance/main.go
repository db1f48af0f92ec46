// Command pipes-conformance is the external process of Dagster's community
// Pipes conformance suite, written with raystep's Go Pipes library. The
// suite runs it as `pipes-conformance --test-name NAME [--extras FILE]
// [--job-name NAME] [--custom-payload FILE] [--report-asset-materialization
// FILE] [--report-asset-check FILE]` under PipesSubprocessClient; NAME may
// carry a pytest parameter suffix ("test_extras[...]").
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

func run(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, err := parseFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "pipes-conformance: %v\n", err)
		return 2
	}
	s, err := openSession(args, lookup, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "pipes-conformance: %v\n", err)
		return 3
	}
	defer s.Recover()
	err = runTest(s, opts)
	if cerr := s.CloseWithError(err); cerr != nil {
		fmt.Fprintf(stderr, "pipes-conformance: close: %v\n", cerr)
		return 3
	}
	if err != nil {
		fmt.Fprintf(stderr, "pipes-conformance: %v\n", err)
		return 1
	}
	return 0
}
