package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/history"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

// shells are the shells `raystep completion` writes a script for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

// completionCommand writes a shell's completion script. The script asks
// raystep itself (cobra's hidden __complete command) for what fits where
// the cursor is, so completions follow the clusters and steps there are.
func (a *app) completionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script for bash, zsh, fish or PowerShell",
		Long: `completion prints a script that teaches the shell raystep's commands and
flags, and what their values can be: a spec's -f takes YAML and JSON files
(fish offers every file there), --backend local or kuberay, --gpu a
gpuTypes key of the profile, --set the spec's paths one level at a time
and, after the "=", a field's allowed values (spec.teardown=on_success),
--context the kubeconfig's contexts; down, dashboard, notebook and run
--cluster take the names of the interactive clusters of the backend
(--backend, else $RAYSTEP_BACKEND), which raystep looks up as you press
Tab; logs takes the steps of this machine's history, the running ones
first, then the latest to end. A lookup that takes more than 3 seconds (an
API server that does not answer) offers nothing rather than hold up the
shell.

Load it for the current shell, or install it for every new one:

  bash:        source <(raystep completion bash)
               raystep completion bash > ~/.local/share/bash-completion/completions/raystep
  zsh:         source <(raystep completion zsh)
               raystep completion zsh > "${fpath[1]}/_raystep"
  fish:        raystep completion fish > ~/.config/fish/completions/raystep.fish
  PowerShell:  raystep completion powershell | Out-String | Invoke-Expression

bash needs the bash-completion package; zsh needs compinit
(autoload -U compinit; compinit in ~/.zshrc).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || !slices.Contains(shells, args[0]) {
				return fmt.Errorf("completion: name one shell: %s (got %q)", strings.Join(shells, ", "), args)
			}
			return nil
		},
		ValidArgs: shells,
		RunE: func(cmd *cobra.Command, args []string) error {
			root, w := cmd.Root(), a.stdout
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			default:
				return root.GenPowerShellCompletionWithDesc(w)
			}
		},
	}
}

// offer is a completion with its description. Both are one line of the
// __complete protocol, and what is in them comes from an API server, a
// profile or files that others may write: a control character (a
// newline would add an offer of its own) becomes a space.
func offer(text, desc string) cobra.Completion {
	oneLine := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, s)
	}
	return cobra.CompletionWithDesc(oneLine(text), oneLine(desc))
}

// completionLimit bounds a lookup made for a completion: a shell waits
// for it with the user's cursor.
const completionLimit = 3 * time.Second

// specExts are the extensions a spec, profile or run-cluster file has.
var specExts = []string{"yaml", "yml", "json"}

// addCompletions tells cobra what every command's arguments and flag
// values can be, for `raystep completion`'s scripts.
func (a *app) addCompletions(root *cobra.Command) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		flags := map[string]cobra.CompletionFunc{
			"backend":    fixed("local", "kuberay"),
			"log-format": fixed("auto", "text", "json", "logfmt"),
			"gpu":        a.completeGPUTypes,
			"cluster":    a.completeClusters(false),
			"set":        completeSet,
		}
		switch cmd.Name() {
		case "render":
			flags["output"] = fixed("yaml", "json")
		case "ls":
			flags["output"] = fixed("wide", "json")
		}
		for name, fn := range flags {
			if cmd.Flags().Lookup(name) != nil {
				_ = cmd.RegisterFlagCompletionFunc(name, fn)
			}
		}
		for _, name := range []string{"file", "run-cluster"} {
			if cmd.Flags().Lookup(name) != nil {
				_ = cmd.MarkFlagFilename(name, specExts...)
			}
		}
		switch cmd.Name() {
		case "down":
			cmd.ValidArgsFunction = a.completeClusters(true)
		case "dashboard", "notebook":
			cmd.ValidArgsFunction = a.completeClusters(false)
		case "logs":
			cmd.ValidArgsFunction = a.completeSteps
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
	_ = root.MarkPersistentFlagFilename("profile", specExts...)
	_ = root.MarkPersistentFlagFilename("kubeconfig")
	_ = root.RegisterFlagCompletionFunc("context", a.completeKubeContexts)
}

// completeKubeContexts offers the contexts of the kubeconfig (--kubeconfig,
// else $KUBECONFIG, else ~/.kube/config), with their cluster and namespace.
func (a *app) completeKubeContexts(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	contexts, err := kuberay.KubeContexts(a.connectOptions())
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]cobra.Completion, 0, len(contexts))
	for _, c := range contexts {
		desc := "cluster " + c.Cluster
		if c.Namespace != "" {
			desc += ", namespace " + c.Namespace
		}
		if c.Current {
			desc += " (current)"
		}
		out = append(out, offer(c.Name, desc))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeClusters offers the interactive clusters of the completed
// command's backend, in its --namespace if it has one: for notebook only
// those with a notebook; with many (down, which takes several and clears
// away expired ones) each name not typed yet, else one name at all.
func (a *app) completeClusters(many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		if len(args) > 0 && !many {
			return nil, none
		}
		backend := a.backend(cmd)
		var fleets []fleet.Fleet
		switch {
		case a.newFleets != nil:
			fleets, _ = a.newFleets(cmd, "completion")
		case backend == fleet.BackendKubeRay:
			fleets = []fleet.Fleet{a.kubeFleet(cmd, "completion")}
		default:
			local, err := a.localFleet()
			if err != nil {
				return nil, none
			}
			fleets = []fleet.Fleet{local}
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionLimit)
		defer cancel()
		rows, err := fleet.List(ctx, fleets, fleet.Scope{Namespace: flagValue(cmd, "namespace")})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError | none
		}
		var out []cobra.Completion
		for _, r := range rows {
			if r.ClusterKind != fleet.KindInteractive || r.Backend != backend || slices.Contains(args, r.Name) ||
				(cmd.Name() == "notebook" && !r.Notebook) {
				continue
			}
			out = append(out, offer(r.Name, clusterDesc(r)))
		}
		return out, none
	}
}

// clusterDesc is what a completion says of an interactive cluster.
func clusterDesc(r fleet.Record) string {
	parts := []string{r.Deployment}
	if r.GPUsHeld != "" {
		parts = append(parts, r.GPUsHeld)
	}
	if r.Owner != "" {
		parts = append(parts, "owner "+r.Owner)
	}
	if r.Namespace != "" {
		parts = append(parts, "namespace "+r.Namespace)
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), ", ")
}

// completeGPUTypes offers the GPU types the profile names.
func (a *app) completeGPUTypes(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	profile, err := a.profile(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for name, g := range profile.Spec.GPUTypes {
		out = append(out, offer(name, g.ResourceName))
	}
	slices.Sort(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeSteps offers the steps of this machine's history, the latest
// first (a running step's too): what logs takes; not the clusters' records
// the history also holds. The profile's store is
// not asked: it may be far away.
func (a *app) completeSteps(_ *cobra.Command, args []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	directive := cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	if len(args) > 0 {
		return nil, directive
	}
	dir, err := a.historyDir()
	if err != nil {
		return nil, directive
	}
	recs, err := dir.Latest(typed) // only those: a busy machine's history holds thousands
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | directive
	}
	now := time.Now()
	out := make([]cobra.Completion, 0, len(recs))
	for _, r := range recs {
		if r.Kind == fleet.KindInteractive || r.Kind == fleet.KindRun {
			continue // a cluster's history: it has no driver log
		}
		out = append(out, offer(r.Name, stepDesc(r, now)))
	}
	return out, directive
}

// stepDesc is what a completion says of a step in the history: how it
// ended and when, or since when it runs.
func stepDesc(r history.Record, now time.Time) string {
	if r.Ended.IsZero() {
		return fmt.Sprintf("%s, running for %s", r.Spec, shortAge(now.Sub(r.Started)))
	}
	return fmt.Sprintf("%s, %s %s ago", r.Spec, r.Reason, shortAge(now.Sub(r.Ended)))
}

// completeSet offers the spec's paths, one level at a time, and a field's
// allowed values after its "=": what --set takes.
func completeSet(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	directive := cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	found, err := schemas.SetCompletions(typed)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | directive
	}
	out := make([]cobra.Completion, 0, len(found))
	for _, c := range found {
		out = append(out, offer(c.Text, c.Description))
	}
	return out, directive
}
