package main

import (
	"flag"
	"io"
	"strings"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

type options struct {
	testName                   string
	extras                     string
	jobName                    string
	customPayload              string
	reportAssetMaterialization string
	reportAssetCheck           string
	contextLoader              string
	messageWriter              string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("pipes-conformance", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.testName, "test-name", "", "name of the suite's test")
	fs.StringVar(&o.extras, "extras", "", "JSON file the context's extras must equal")
	fs.StringVar(&o.jobName, "job-name", "", "job name the context must carry")
	fs.StringVar(&o.customPayload, "custom-payload", "", `JSON file {"payload": ...} to send as a custom message`)
	fs.StringVar(&o.reportAssetMaterialization, "report-asset-materialization", "", "JSON file describing the materialization")
	fs.StringVar(&o.reportAssetCheck, "report-asset-check", "", "JSON file describing the asset check")
	fs.StringVar(&o.contextLoader, "context-loader", "", "context loader (only the default is supported)")
	fs.StringVar(&o.messageWriter, "message-writer", "", "message writer (only the default is supported)")
	fs.String("dagster-pipes-context", "", "bootstrap context (normally an environment variable)")
	fs.String("dagster-pipes-messages", "", "bootstrap messages (normally an environment variable)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if i := strings.IndexByte(o.testName, '['); i >= 0 {
		o.testName = o.testName[:i]
	}
	return o, nil
}

func openSession(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (*pipes.Session, error) {
	return pipes.Open(pipes.Options{Args: args, LookupEnv: lookup, Stdout: stdout, Stderr: stderr})
}
