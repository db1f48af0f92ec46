package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/internal/quickstart"
	"github.com/raystep/raystep/progress"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/schemas"
)

// pollInterval spaces the runner's status polls: short enough that a
// finished job is noticed about as fast as Ray's own CLI does.
const pollInterval = 500 * time.Millisecond

// runOptions are run's flags.
type runOptions struct {
	file, namespace             string
	cluster                     string // --cluster: an interactive cluster to borrow
	runCluster                  string // --run-cluster: the run's cluster section
	set                         []string
	pipesContext, pipesMessages string
	uiURL                       string // --ui-url: where raystep ui serves the History view
}

func (a *app) runCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -f SPEC [--backend local|kuberay] [--namespace NS] [--set path=value]...",
		Short: "Run one Ray job as a step: provision, submit, relay, report, tear down",
		Long: `run validates the spec, brings up its Ray cluster, submits the entrypoint,
relays the job's log and tears the cluster down on every path.

Launched by Dagster (DAGSTER_PIPES_CONTEXT / DAGSTER_PIPES_MESSAGES, or the
--dagster-pipes-* flags), run is quiet: phases, the driver's logs, asset
checks and the materialization (the driver's metadata plus raystep/* keys)
travel as Pipes messages, the job's plain log lines go to stdout and
raystep's own error, if any, to stderr. Standalone, run talks to a person:
phases with elapsed time and the driver's reports on stderr, the job's log
on stdout. --log-format (default $RAYSTEP_LOG_FORMAT, else auto) says how
stderr shows them: auto is text, coloured on a terminal unless NO_COLOR is
set; text is never coloured; json writes one JSON object per event and
line (time, elapsed_s, phase, kind, message, and cluster, submission_id,
dashboard_url, attrs when set); logfmt one logfmt line per event with the
same fields (elapsed, msg).

The local backend starts a private Ray head for the step and stops it at
the end. With RAY_ADDRESS (http://HEAD:8265, or the GCS address HEAD:6379),
RAY_API_SERVER_ADDRESS or RAYSTEP_DASHBOARD_URL it runs on that existing
cluster and leaves it running; a token-enabled cluster's token comes from
RAYSTEP_DASHBOARD_TOKEN, else RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
~/.ray/auth_token, as for Ray's own tools. RAY_ADDRESS=local, Ray's
word for a new Ray on this machine, gets the step a private head. A
private head listens on 127.0.0.1 only and requires a token of its own.

With --cluster NAME the step runs on the interactive cluster raystep up
made, which it borrows: the spec's cluster section is not used and the
step never stops or deletes the cluster. On the local backend that is the
cluster's private head on this machine, reached with its own dashboard
URL and token (RAY_ADDRESS and the other variables above are not used).
On KubeRay it is the cluster of that name in the step's namespace: its
RayJob selects it (spec.clusterSelector) instead of describing one, and
the step deletes its RayJob but never the cluster.

With --run-cluster FILE (or $RAYSTEP_RUN_CLUSTER) a step whose
spec.cluster.reuse is run takes the run's cluster section from FILE (one
key, cluster, written as a spec's spec.cluster) instead of its own, so the
steps of a Dagster run describe the same cluster and share one; --set
overrides apply to it. Problems in FILE name FILE and the field, and a
driver (spec.entrypointResources) that fits no node of it is refused, exit
2, before anything is created. A step with reuse step ignores it.

A dashboard that stops answering while the job runs is tried again: run
warns at once and every 30s, and after RAYSTEP_DASHBOARD_OUTAGE (default
3m) without an answer it fails the step (exit 3), stopping the job if the
dashboard lets it; a private head ends the job with the head.

When the step ends its history is kept (see raystep logs and ls
--finished): on this machine, and in the store the profile's
spec.history.url names. With --ui-url (or $RAYSTEP_UI_URL) naming where
raystep ui serves, the step's Dagster metadata raystep/history_url links to
its page in the UI's History view.

A second signal stops waiting for the teardown. On the local backend a
SIGKILLed run leaves nothing behind either: the private head's keeper sees
raystep gone and kills every process of the head and the job.

` + exitCodesHelp(),
		Example: `  raystep run -f examples/ads_ranking/train.yaml
  RAY_ADDRESS=http://127.0.0.1:8265 raystep run -f train.yaml --set spec.timeouts.run=10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.file == "" {
				return &usageError{errors.New("run: -f SPEC is required")}
			}
			return a.runStep(cmd.Context(), cmd, o)
		},
	}
	addBackendFlag(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "job spec to run, - for stdin (required)")
	namespaceFlag(f, &o.namespace, "", "namespace (default $RAYSTEP_NAMESPACE, the spec's, the profile's, then the kubeconfig's)")
	f.StringArrayVar(&o.set, "set", nil, "override a spec value, e.g. spec.timeouts.run=10m (repeatable)")
	f.StringVar(&o.cluster, "cluster", "", "run on this interactive cluster (raystep up) and never stop it")
	addRunClusterFlag(f, &o.runCluster)
	f.StringVar(&o.uiURL, "ui-url", "", "raystep ui's URL (default $RAYSTEP_UI_URL): the step's Dagster metadata links to its History page there")
	f.StringVar(&a.logFormat, "log-format", "", "progress on stderr: "+progress.Formats+" (default $RAYSTEP_LOG_FORMAT, else auto)")
	f.StringVar(&o.pipesContext, "dagster-pipes-context", "", "Dagster Pipes context bootstrap (set by Dagster)")
	f.StringVar(&o.pipesMessages, "dagster-pipes-messages", "", "Dagster Pipes messages bootstrap (set by Dagster)")
	return cmd
}

// runStep is the whole step: open Pipes, load the spec, run, close.
func (a *app) runStep(ctx context.Context, cmd *cobra.Command, o runOptions) error {
	sess, err := pipes.Open(pipes.Options{
		Args: o.pipesArgs(), LookupEnv: a.lookup.Lookup, Stdout: a.stdout, Stderr: a.stderr,
	})
	if err != nil {
		return &usageError{fmt.Errorf("open dagster pipes: %w", err)}
	}
	p, err := a.prepare(cmd, o, sess)
	if err != nil {
		return a.closeSession(sess, err)
	}
	quickstart.Lean(stepGCPercent)
	step, backend := p.step, p.backend
	r := &runner.Runner{
		Backend:         backend,
		Connect:         a.connector().Connect,
		Pack:            adapters.Pack,
		Stdout:          a.stdout,
		EncodeBootstrap: pipes.EncodeBootstrap,
		Abort:           fleet.Abort(ctx),
		PollInterval:    pollInterval,
	}
	if sess.Active() {
		r.Session, r.Stdout = adapters.Session{Pipes: sess}, sess.Stdout()
	} else {
		sink, err := a.eventSink(a.stderr)
		if err != nil {
			return a.closeSession(sess, err)
		}
		r.Events, r.Stderr = sink, a.stderr
	}
	hist := a.startHistory(step, p.spec, p.profile.Spec.History, backend.Name())
	r.Stdout = hist.tee(r.Stdout)
	res, err := r.Run(ctx, step)
	err = a.closeSession(sess, err) // Run closed it already; this covers Run refusing the step
	hist.finish(res, err, exitCode(ctx, err))
	if err != nil && r.Events != nil {
		err = &shownError{err} // Run's last progress line said it
	}
	return err
}

// connector builds the step's Jobs API clients: raystep's logger (their
// requests, retries and reconnections are logged at debug level), its
// version as the user agent, the outage budget from the environment.
func (a *app) connector() adapters.Connector {
	return adapters.Connector{Logger: a.log, UserAgent: "raystep/" + a.version, MaxOutage: a.cfg.DashboardOutage}
}

// pipesArgs hands the --dagster-pipes-* flags to pipes.Open.
func (o runOptions) pipesArgs() []string {
	var args []string
	if o.pipesContext != "" {
		args = append(args, pipes.ArgContext, o.pipesContext)
	}
	if o.pipesMessages != "" {
		args = append(args, pipes.ArgMessages, o.pipesMessages)
	}
	return args
}

// prepared is a step ready to run, with what it was resolved from.
type prepared struct {
	step    runner.Step
	spec    *schemas.Spec
	profile *schemas.Profile
	backend runner.Backend
}

// prepare loads the profile and spec and builds the resolved step and its
// backend (choices made for the user are notices on the step); nothing is
// started.
func (a *app) prepare(cmd *cobra.Command, o runOptions, sess *pipes.Session) (prepared, error) {
	if err := checkUIURL(cmp.Or(o.uiURL, a.cfg.UIURL)); err != nil {
		return prepared{}, err
	}
	profile, err := a.profile(cmd)
	if err != nil {
		return prepared{}, err
	}
	rc, err := a.loadRunCluster(cmd.Context(), o.runCluster)
	if err != nil {
		return prepared{}, err
	}
	parts, err := adapters.Partitions(sess)
	if err != nil {
		return prepared{}, err
	}
	spec, err := schemas.LoadContext(cmd.Context(), o.file, schemas.LoadOptions{Set: o.set, Profile: profile, Stdin: a.stdin,
		RunCluster: rc, Partitions: parts})
	if err == nil {
		err = adapters.CheckWorkingDir(cmd.Context(), o.file, spec)
	}
	if err != nil {
		return prepared{}, err
	}
	step, err := adapters.StepFromSpec(spec, sess)
	if err != nil {
		return prepared{}, err
	}
	noteRunCluster(&step, spec, rc)
	if err := checkReuse(spec, o); err != nil {
		return prepared{}, err
	}
	s, err := a.site(cmd, "run --backend kuberay")
	if err != nil {
		return prepared{}, err
	}
	step, b, err := s.Place(cmd.Context(), step, fleet.Placement{Spec: spec, Profile: profile, Cluster: o.cluster})
	if err == nil && spec.Spec.Cluster.Reuse == schemas.ReuseRun && step.Dagster.RunID == "" {
		// A step run from a shell is a run of one step: it shares its
		// cluster with nobody, and no run-status sensor would ever remove
		// a cluster it left behind, so it gets one of its own.
		step.Notices = append(step.Notices, "spec.cluster.reuse is run, but the step is not part of a Dagster run: "+
			"it gets a cluster of its own, deleted at its end")
	}
	step.HistoryURL = historyPage(cmp.Or(o.uiURL, a.cfg.UIURL), step.ID) // the ID is Place's
	return prepared{step: step, spec: spec, profile: profile, backend: b}, err
}

// closeSession closes the Pipes session, with err as the exception after
// an ERROR log line so Dagster shows raystep's error; a session the runner
// closed is left alone. As with the runner's own messages, a failure to
// tell Dagster fails a step that otherwise succeeded as infrastructure
// (exit 3); after a failed step, whose error keeps deciding the exit
// code, it is printed on stderr beside that error.
func (a *app) closeSession(sess *pipes.Session, err error) error {
	var perr error
	if err == nil || !sess.Active() {
		perr = sess.Close(nil)
	} else {
		perr = sess.Log(pipes.LevelError, "raystep failed: "+err.Error())
		if errors.Is(perr, pipes.ErrClosed) {
			return err // the runner closed it, with err
		}
		exc := adapters.Exception(&runner.Exception{Name: exceptionName(err), Message: err.Error()})
		if cerr := sess.Close(exc); perr == nil {
			perr = cerr // a log that failed says why; the close fails alike
		}
	}
	if perr == nil {
		return err
	}
	perr = &runner.InfraError{Phase: runner.PhaseReport, Err: fmt.Errorf("close the dagster pipes session: %w", perr)}
	if err == nil {
		return perr
	}
	a.report(perr)
	return err
}

// exceptionName names errors raised before the runner ran.
func exceptionName(err error) string {
	switch {
	case asType[*schemas.ValidationErrors](err):
		return "InvalidSpec"
	case asType[*usageError](err):
		return "UsageError"
	default:
		return "RaystepError"
	}
}

// shownError is an error the step's progress output already showed; it
// is not printed again.
type shownError struct{ err error }

func (e *shownError) Error() string { return e.err.Error() }
func (e *shownError) Unwrap() error { return e.err }

// checkReuse refuses spec.cluster.reuse: run beside --cluster NAME: the
// step would be told to run on two clusters.
func checkReuse(spec *schemas.Spec, o runOptions) error {
	if spec.Spec.Cluster.Reuse == schemas.ReuseRun && o.cluster != "" {
		return &usageError{fmt.Errorf("run --cluster %s: %s: spec.cluster.reuse is run, which shares the run's own cluster: "+
			"drop --cluster or set spec.cluster.reuse=step", o.cluster, spec.File)}
	}
	return nil
}

// eventSink returns where a standalone step's events are shown on w, in
// the format --log-format names, else RAYSTEP_LOG_FORMAT (progress.New);
// any other value is a usage error.
func (a *app) eventSink(w io.Writer) (runner.Sink, error) {
	format, from := a.logFormat, "--log-format"
	if format == "" {
		format, from = a.cfg.LogFormat, "RAYSTEP_LOG_FORMAT"
	}
	sink, err := progress.New(w, format, a.cfg.NoColor != "")
	if err != nil {
		return nil, &usageError{fmt.Errorf("%s=%q: %w", from, format, err)}
	}
	return sink, nil
}
