// Command pipes-example is a small Go program that uses raystep's Pipes
// library the way a real step would; raystep's pytest suite runs it under
// Dagster. --mode picks the behaviour: "full" reports every kind of message,
// "fail" returns an error, "panic" panics on the main path, "invalid" tries
// messages the library must refuse and logs what it refused.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

func run(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pipes-example", flag.ContinueOnError)
	mode := fs.String("mode", "full", "full | fail | panic | invalid | relay (child command after --)")
	fs.String("dagster-pipes-context", "", "bootstrap context")
	fs.String("dagster-pipes-messages", "", "bootstrap messages")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	s, err := pipes.Open(pipes.Options{Args: args, LookupEnv: lookup, Stdout: stdout, Stderr: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "pipes-example: %v\n", err)
		return 3
	}
	defer s.Recover()
	if *mode == "relay" {
		err = relayChild(s, fs.Args())
	} else {
		err = step(s, *mode)
	}
	if cerr := s.CloseWithError(err); cerr != nil {
		fmt.Fprintf(stderr, "pipes-example: close: %v\n", cerr)
		return 3
	}
	if err != nil {
		fmt.Fprintf(stderr, "pipes-example: %v\n", err)
		return 1
	}
	return 0
}

var errTraining = errors.New("loss diverged")

func step(s *pipes.Session, mode string) error {
	fmt.Fprintln(s.Stdout(), "plain line before messages")
	switch mode {
	case "full":
		return full(s)
	case "fail":
		_ = s.Log(pipes.LevelError, "about to fail")
		return fmt.Errorf("train epoch 3: %w", errTraining)
	case "panic":
		var m map[string]int
		m["boom"] = 1 // assignment to a nil map panics
		return nil
	case "invalid":
		return invalidMessages(s)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func full(s *pipes.Session) error {
	for _, l := range []pipes.Level{pipes.LevelDebug, pipes.LevelInfo, pipes.LevelWarning, pipes.LevelError, pipes.LevelCritical} {
		if err := s.Log(l, "go says "+string(l)); err != nil {
			return err
		}
	}
	for i := range 5 {
		if err := s.ReportCustomMessage(map[string]any{"seq": i}); err != nil {
			return err
		}
		fmt.Fprintf(s.Stdout(), "plain line %d\n", i)
	}
	if err := s.ReportAssetMaterialization(pipes.Materialization{DataVersion: "v42", Metadata: allTypes()}); err != nil {
		return err
	}
	for _, c := range []pipes.AssetCheck{
		{CheckName: "rows_positive", Passed: true, Metadata: pipes.Metadata{"rows": pipes.Int(3)}},
		{CheckName: "no_nulls", Passed: false, Severity: pipes.SeverityWarn},
	} {
		if err := s.ReportAssetCheck(c); err != nil {
			return err
		}
	}
	return nil
}

func allTypes() pipes.Metadata {
	desc := "the id"
	return pipes.Metadata{
		"float_whole": pipes.Float(2),
		"float_frac":  pipes.Float(0.25),
		"int":         pipes.Int(7),
		"bool":        pipes.Bool(true),
		"text":        pipes.Text("hello"),
		"url":         pipes.URL("https://ray.io/dashboard"),
		"path":        pipes.Path("/tmp/model.pt"),
		"notebook":    pipes.Notebook("/tmp/eval.ipynb"),
		"md":          pipes.Markdown("# Title"),
		"json":        pipes.JSON(map[string]any{"a": []any{1, 2.5, "x"}}),
		"dagster_run": pipes.DagsterRun("0123abcd-0000-0000-0000-000000000000"),
		"asset":       pipes.Asset("upstream/table"),
		"null":        pipes.Null(),
		"timestamp":   pipes.Timestamp(time.Unix(1700000000, 500000000)),
		"table": pipes.Table(
			[]map[string]any{{"id": 1, "score": 1.0, "name": "a"}, {"id": 2, "score": 0.5, "name": nil}},
			[]pipes.TableColumn{{Name: "id", Type: "int", Description: desc}, {Name: "score", Type: "float"}, {Name: "name", Type: "string",
				Constraints: &pipes.TableColumnConstraints{Nullable: true, Other: []string{"short"}}}},
		),
		"schema":   pipes.TableSchema([]pipes.TableColumn{{Name: "id", Type: "int", Tags: map[string]string{"pii": "no"}}}),
		"lineage":  pipes.ColumnLineage(map[string][]pipes.TableColumnDep{"id": {{AssetKey: []string{"upstream", "table"}, ColumnName: "uid"}}}),
		"inferred": pipes.Infer("inferred text"),
	}
}

// invalidMessages tries messages Dagster would choke on; each must be refused
// in Go. It logs what was refused, then materializes normally.
func invalidMessages(s *pipes.Session) error {
	tries := []struct {
		name string
		err  error
	}{
		{"nan", s.ReportAssetMaterialization(pipes.Materialization{Metadata: pipes.Metadata{"x": pipes.Float(nan())}})},
		{"level", s.Log("TRACE", "x")},
		{"severity", s.ReportAssetCheck(pipes.AssetCheck{CheckName: "c", Severity: "FATAL"})},
		{"asset", s.ReportAssetMaterialization(pipes.Materialization{AssetKey: "not_in_step"})},
		{"json", s.ReportAssetMaterialization(pipes.Materialization{Metadata: pipes.Metadata{"j": pipes.JSON(3)}})},
	}
	for _, t := range tries {
		if !errors.Is(t.err, pipes.ErrInvalidMessage) {
			return fmt.Errorf("%s: want ErrInvalidMessage, got %v", t.name, t.err)
		}
		if err := s.Log(pipes.LevelInfo, "refused "+t.name); err != nil {
			return err
		}
	}
	return s.ReportAssetMaterialization(pipes.Materialization{Metadata: pipes.Metadata{"ok": pipes.Float(1)}})
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}
