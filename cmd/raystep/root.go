package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/zapr"
	"github.com/sethvargo/go-envconfig"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/internal/quickstart"
	"github.com/raystep/raystep/schemas"
)

// app carries what every command needs: streams, configuration and logger.
// Tests build one with their own streams and lookuper.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// lookup reads RAYSTEP_* variables; tests use envconfig.MapLookuper.
	lookup envconfig.Lookuper
	cfg    *config
	log    *zap.Logger
	// started is set by the root's PersistentPreRun once cobra has parsed
	// the flags and checked the arguments of the command it runs, so
	// errors before it (unknown commands, flags, bad arguments) are usage
	// errors.
	started bool
	// command is the command line of the command cobra ran or tried to
	// ("raystep up"), for the usage line; empty before cobra ran.
	command string
	// kubeFlags are --kubeconfig and --context (kuberay.go).
	kubeFlags kubeFlags
	// version is raystep's version (main.version), sent as raystep/VERSION.
	version string
	// logFormat is run's --log-format; empty means RAYSTEP_LOG_FORMAT.
	logFormat string
	// newFleets, when set, replaces the backends ls, gc and down
	// --dagster-run-id ask (fleets):
	// tests give fakes.
	newFleets func(cmd *cobra.Command, name string) ([]fleet.Fleet, error)
	// newSite, when set, replaces the backend up, down, dashboard,
	// notebook and run talk to (site): tests give a fake.
	newSite func(cmd *cobra.Command, what string) (site, error)
}

// run is raystep's whole life after main: it parses args, runs one command
// and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, lookup: envconfig.OsLookuper(), version: version}
	return a.main(ctx, args)
}

func (a *app) main(ctx context.Context, args []string) int {
	cfg, err := loadConfig(ctx, a.lookup)
	if err != nil {
		a.report(err)
		return exitCode(ctx, err)
	}
	a.cfg = cfg
	a.log, err = newLogger(cfg.LogLevel, a.stderr)
	if err != nil {
		a.report(err)
		return exitCode(ctx, err)
	}
	defer func() { _ = a.log.Sync() }()
	setKubernetesLogger(a.log)

	root := a.rootCommand()
	root.SetArgs(args)
	ran, err := root.ExecuteContextC(ctx)
	if ran != nil {
		a.command = ran.CommandPath()
	}
	if err != nil && !a.started {
		err = &usageError{err}
	}
	if err != nil {
		a.report(err)
	}
	return exitCode(ctx, err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "raystep",
		Short: "Run Ray training, evaluation and batch inference as Dagster steps",
		Long: `raystep runs one Ray job as a Dagster step: it validates a job spec, brings
up an ephemeral Ray cluster (KubeRay or local), submits the entrypoint, relays
logs and metrics to Dagster and tears the cluster down.`,
		// No subcommand sets a PersistentPreRun of its own: cobra would
		// run that one instead of this.
		PersistentPreRun: a.begin,
		SilenceUsage:     true,
		SilenceErrors:    true,
		// completionCommand replaces cobra's: one command, in raystep's words.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.PersistentFlags().String("profile", "", "platform profile file (default $RAYSTEP_PROFILE, else the built-in profile)")
	a.addKubeFlags(root)
	root.AddCommand(a.runCommand(), a.validateCommand(), a.renderCommand(), a.schemaCommand(), a.versionCommand(),
		a.lsCommand(), a.logsCommand(), a.gcCommand(), a.upCommand(), a.downCommand(),
		a.dashboardCommand(), a.notebookCommand(), a.uiCommand(), a.completionCommand())
	a.addCompletions(root)
	return root
}

// begin marks the start of a command's own work: cobra calls it for every
// subcommand after parsing its flags and checking its arguments.
func (a *app) begin(cmd *cobra.Command, _ []string) {
	a.started = true
	switch {
	case briefCommands[cmd.Name()], cmd.Name() == "run":
		// run validates as validate does, then runStep calls
		// quickstart.Lean once the step is prepared.
		quickstart.Brief(briefMemoryLimit)
	default:
		quickstart.Done()
	}
	if servingCommands[cmd.Name()] {
		quickstart.Parallel()
	}
}

// servingCommands serve browsers, many requests at once: they get every
// processor (see package quickstart).
var servingCommands = map[string]bool{"ui": true, "dashboard": true, "notebook": true}

// briefCommands end within milliseconds: they run without the garbage
// collector (see package quickstart) unless their heap nears
// briefMemoryLimit, which a hostile spec is refused well before.
var briefCommands = map[string]bool{"validate": true, "render": true, "schema": true, "version": true}

// briefMemoryLimit is the heap at which a brief command collects garbage.
const briefMemoryLimit = 64 << 20

// stepGCPercent is the collector's percentage in `raystep run` when GOGC
// is unset, from the moment its step is prepared (spec and profile
// validated): one process per step, alive as long as its job, so its
// memory is what counts (see quickstart.Lean). Turning the collector on
// only then lets its first collection also sweep what validation
// allocated, so a short step needs one collection, not two.
const stepGCPercent = 50

// profile loads the platform profile named by --profile, RAYSTEP_PROFILE or
// nothing (the built-in one).
func (a *app) profile(cmd *cobra.Command) (*schemas.Profile, error) {
	file, _ := cmd.Flags().GetString("profile")
	if file == "" {
		file = a.cfg.Profile
	}
	if file == "" {
		return schemas.DefaultProfile()
	}
	a.log.Debug("loading profile", zap.String("file", file))
	return schemas.LoadProfile(file)
}

// report prints err for a person: validation problems one per line, others
// prefixed with "raystep:". An error the step already showed is not
// printed twice.
func (a *app) report(err error) {
	var se *shownError
	if errors.As(err, &se) {
		return
	}
	var ve *schemas.ValidationErrors
	if errors.As(err, &ve) {
		fmt.Fprintln(a.stderr, ve.Error())
		return
	}
	fmt.Fprintf(a.stderr, "raystep: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, fleet.ErrUsage) {
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmp.Or(a.command, "raystep"))
	}
}

// setKubernetesLogger makes log the logger of the Kubernetes client
// libraries (klog), at debug level. What they log is raystep's own
// failures before raystep words them (a port-forward's refused connection
// while the notebook starts, one line each poll; a watch that broke) or no
// failure at all, and on stderr it broke into what raystep prints;
// RAYSTEP_LOG_LEVEL=debug shows it.
//
// klog has one logger per process, and klog.SetLogger must not run while
// anything logs through it: a watch's goroutine may still be logging when
// the next command starts in the same process (as the tests run them). So
// klog's logger is set once, and each command swaps the core behind it.
func setKubernetesLogger(log *zap.Logger) {
	core := log.Core()
	kubernetesCore.Store(&core)
	kubernetesOnce.Do(func() {
		klog.SetLogger(zapr.NewLogger(zap.New(debugCore{swapCore{cur: &kubernetesCore}}).Named("kubernetes")))
	})
}

var (
	kubernetesCore atomic.Pointer[zapcore.Core]
	kubernetesOnce sync.Once
)

// swapCore logs through the core cur holds when an entry is logged.
type swapCore struct {
	cur    *atomic.Pointer[zapcore.Core]
	fields []zapcore.Field
}

func (c swapCore) base() zapcore.Core {
	if p := c.cur.Load(); p != nil {
		return *p
	}
	return zapcore.NewNopCore()
}

func (c swapCore) Enabled(l zapcore.Level) bool { return c.base().Enabled(l) }

func (c swapCore) With(fields []zapcore.Field) zapcore.Core {
	return swapCore{cur: c.cur, fields: append(slices.Clip(c.fields), fields...)}
}

func (c swapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	core := c.base()
	if !core.Enabled(e.Level) {
		return ce
	}
	if len(c.fields) > 0 {
		core = core.With(c.fields)
	}
	return core.Check(e, ce)
}

// Write serves a caller that skips Check; Check hands entries to the
// current core itself.
func (c swapCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	return c.base().With(c.fields).Write(e, fields)
}

func (c swapCore) Sync() error { return c.base().Sync() }

// debugCore logs every entry at debug level, and none more verbose.
type debugCore struct{ zapcore.Core }

func (c debugCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.DebugLevel && c.Core.Enabled(zapcore.DebugLevel)
}

func (c debugCore) With(fields []zapcore.Field) zapcore.Core { return debugCore{c.Core.With(fields)} }

func (c debugCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(e.Level) {
		return ce
	}
	e.Level = zapcore.DebugLevel
	return c.Core.Check(e, ce)
}

// newLogger builds raystep's one logger: human-readable, on stderr.
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, &usageError{fmt.Errorf("RAYSTEP_LOG_LEVEL=%q: want debug, info, warn or error", level)}
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = ""
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), lvl)
	return zap.New(core), nil
}
