package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cliDocs is where the CLI reference lives, one page per command, made
// from the commands' own help: `go test ./cmd/raystep -run
// TestCLIReference -update` writes it again.
const cliDocs = "../../docs/cli"

// TestCLIReference: docs/cli holds exactly the pages cliReference makes
// from the cobra commands, so the help text is written once and the
// reference cannot fall behind it.
func TestCLIReference(t *testing.T) {
	t.Parallel()
	a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	pages := cliReference(a.rootCommand())
	if *updateScripts {
		old, _ := filepath.Glob(filepath.Join(cliDocs, "*.md"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for name, text := range pages {
			if err := os.WriteFile(filepath.Join(cliDocs, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(cliDocs, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got[filepath.Base(f)] = string(b)
	}
	if diff := cmp.Diff(pages, got); diff != "" {
		t.Errorf("docs/cli is not the commands' help (go test ./cmd/raystep -run TestCLIReference -update writes it; -want +got):\n%s", diff)
	}
}

// cliReference renders root and every visible command under it as
// Markdown pages named by their command path (raystep_run.md), and an
// index (README.md).
func cliReference(root *cobra.Command) map[string]string {
	pages := map[string]string{}
	var index strings.Builder
	index.WriteString("# raystep command reference\n\n" +
		"Made from the commands' own help (`raystep COMMAND --help` prints the same);\n" +
		"`go test ./cmd/raystep -run TestCLIReference -update` writes it again.\n\n" +
		"| command | what it does |\n| --- | --- |\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		name := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		pages[name] = cliPage(c)
		fmt.Fprintf(&index, "| [`%s`](%s) | %s |\n", c.CommandPath(), name, c.Short)
		subs := slices.Clone(c.Commands())
		slices.SortFunc(subs, func(x, y *cobra.Command) int { return strings.Compare(x.Name(), y.Name()) })
		for _, s := range subs {
			if s.IsAvailableCommand() {
				walk(s)
			}
		}
	}
	walk(root)
	pages["README.md"] = index.String()
	return pages
}

// cliPage is one command's page.
func cliPage(c *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s\n\n```\n%s\n```\n", c.CommandPath(), c.Short, c.UseLine())
	if c.Long != "" {
		fmt.Fprintf(&b, "\n```text\n%s\n```\n", strings.TrimSpace(c.Long))
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "\n## Examples\n\n```\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
	}
	flags := func(title string, fs *pflag.FlagSet) {
		if u := fs.FlagUsages(); u != "" {
			fmt.Fprintf(&b, "\n## %s\n\n```\n%s```\n", title, u)
		}
	}
	flags("Flags", c.NonInheritedFlags())
	flags("Flags of every command", c.InheritedFlags())
	if c.HasParent() {
		fmt.Fprintf(&b, "\nSee also: [%s](%s.md)\n", c.Parent().CommandPath(), strings.ReplaceAll(c.Parent().CommandPath(), " ", "_"))
	}
	return b.String()
}
