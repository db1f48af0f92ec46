package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raystep/raystep/history"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/schemas"
)

// historyDir is where this machine keeps the history of ended steps:
// beside the local backend's cluster records.
func (a *app) historyDir() (history.Dir, error) {
	dir, err := a.localStateDir()
	if err != nil {
		return history.Dir{}, err
	}
	return history.Dir{Root: filepath.Join(filepath.Dir(dir), "history")}, nil
}

// historyPage is the URL of step id's page in the History view of the
// raystep ui at base (checked by checkUIURL); empty without a base.
func historyPage(base, id string) string {
	u, err := url.Parse(base)
	if base == "" || err != nil {
		return ""
	}
	u.RawQuery, u.Fragment = "", ""
	return u.JoinPath("history", id).String() + "/"
}

// checkUIURL refuses a --ui-url that is not one people open a page by.
func checkUIURL(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return &usageError{fmt.Errorf("--ui-url %q: want the http(s) URL people open raystep ui by, e.g. https://raystep.example.com/", redactURL(base))}
	}
	return nil
}

// redactURL hides the password of a URL that carries one.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// historyIndex reads this machine's history and the profile's store (if
// it names one) as one; close it when done. An error only when neither
// can be read.
func (a *app) historyIndex(cmd *cobra.Command) (*history.Index, func(), error) {
	var local *history.Dir
	dir, derr := a.historyDir()
	if derr == nil {
		local = &dir
	}
	profile, err := a.profile(cmd)
	if err != nil {
		return nil, nil, err
	}
	var remote *history.Remote
	if u := profile.Spec.History.URL; u != "" {
		if remote, err = history.OpenRemote(cmd.Context(), u); err != nil {
			return nil, nil, err
		}
	}
	if local == nil && remote == nil {
		return nil, nil, derr
	}
	done := func() {}
	if remote != nil {
		done = func() { _ = remote.Close() }
	}
	return history.NewIndex(local, remote), done, nil
}

// stepHistory keeps one step's history: its driver log while it runs, its
// record once it ended, on this machine and, when the profile names one,
// in the history's store. A failure to keep it is a warning; the step's
// own result never changes for it.
type stepHistory struct {
	a       *app
	dir     history.Dir
	log     *history.LogWriter
	step    runner.Step
	digest  string
	backend string
	started time.Time
	// remote is the profile's store; scratch says dir is a temporary
	// one, removed once the record is in the store.
	remote  string
	scratch bool
}

// remoteWriteLimit bounds the write of a step's history to its store at
// the step's end: a store that cannot be reached must not hold up the
// step's result (and its teardown is done by then).
var remoteWriteLimit = 10 * time.Second

// startHistory opens the step's driver log; nil (after a warning) when
// the history cannot be kept. A process with no state dir (neither HOME
// nor XDG_STATE_HOME, as in some containers) keeps none, quietly, unless
// the profile names a store: then the log is kept in a temporary
// directory until it is written there.
func (a *app) startHistory(step runner.Step, spec *schemas.Spec, hp schemas.HistoryProfile, backend string) *stepHistory {
	h := &stepHistory{a: a, step: step, digest: specDigest(spec), backend: backend, started: time.Now(), remote: hp.URL}
	dir, err := a.historyDir()
	switch {
	case err == nil:
		h.dir = dir
	case hp.URL == "":
		a.log.Debug("no history for this step", zap.Error(err))
		return nil
	default:
		tmp, terr := os.MkdirTemp("", "raystep-history-")
		if terr != nil {
			a.warnHistory(terr)
			return nil
		}
		h.dir, h.scratch = history.Dir{Root: tmp}, true
	}
	if h.log, err = h.dir.NewLogWriter(step.ID, history.DefaultLogCap); err != nil {
		a.warnHistory(err)
		h.cleanup()
		return nil
	}
	running := h.base()
	running.PID = os.Getpid()
	if err := h.dir.Start(running); err != nil {
		a.warnHistory(err)
	}
	return h
}

func (h *stepHistory) cleanup() {
	if h.scratch {
		_ = os.RemoveAll(h.dir.Root)
	}
}

// base is the step's record as known before it ran.
func (h *stepHistory) base() history.Record {
	s := h.step
	return history.Record{
		Name: s.ID, Kind: "step", JobKind: s.Kind, Spec: s.Name, SpecDigest: h.digest, Owner: s.Owner,
		Namespace: s.Namespace, DagsterRun: s.Dagster.RunID, StepKey: s.Dagster.StepKey, Assets: s.Dagster.AssetKeys,
		Partition: partitionKey(s.Dagster.Context), Backend: h.backend, Shape: s.Shape, GPUType: s.GPUType,
		GPUCount: s.GPUCount, Started: h.started.UTC(),
	}
}

// tee returns w writing the driver's log into the history too.
func (h *stepHistory) tee(w io.Writer) io.Writer {
	if h == nil {
		return w
	}
	return io.MultiWriter(w, h.log)
}

// finish writes the step's record: how it ended (err, code) and what
// res says about its phases and its job.
func (h *stepHistory) finish(res runner.Result, err error, code int) {
	if h == nil {
		return
	}
	logSum := h.log.Close()
	if lerr := h.log.Err(); lerr != nil {
		h.a.warnHistory(fmt.Errorf("driver log: %w", lerr))
	}
	s := h.step
	rec := h.base()
	rec.Cluster, rec.Status, rec.Message = res.Cluster, string(res.Job.Status), res.Job.Message
	rec.ExitCode, rec.Reason, rec.Ended, rec.Log = code, endReason(err, code), time.Now().UTC(), logSum
	if err != nil {
		rec.Error = err.Error()
	}
	if len(res.Durations) > 0 {
		rec.Phases = map[string]float64{}
		for p, d := range res.Durations {
			rec.Phases[string(p)] = d.Seconds()
		}
	}
	rec.GPUHours = float64(s.GPUCount) * res.JobTime.Hours() // as raystep/gpu_hours
	for _, u := range res.Utilization {
		nu := history.NodeUtilization{Node: u.Node, Samples: u.Samples,
			CPU:    history.Stat{Mean: round1(u.CPU.Mean), Peak: round1(u.CPU.Peak)},
			Memory: history.Stat{Mean: round1(u.Mem.Mean), Peak: round1(u.Mem.Peak)}}
		if u.GPU != nil {
			nu.GPU = &history.Stat{Mean: round1(u.GPU.Mean), Peak: round1(u.GPU.Peak)}
		}
		rec.Utilization = append(rec.Utilization, nu)
	}
	if perr := h.dir.Put(rec); perr != nil {
		h.a.warnHistory(perr)
	}
	if h.remote != "" {
		if err := putRemote(h.remote, rec, h.dir.LogPath(rec.Name)); err != nil {
			h.a.warnHistory(err)
		}
	}
	h.cleanup()
}

// putRemote writes rec and the log at logPath (if any) to the store at
// url, within remoteWriteLimit.
func putRemote(url string, rec history.Record, logPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), remoteWriteLimit)
	defer cancel()
	r, err := history.OpenRemote(ctx, url)
	if err != nil {
		return err
	}
	defer r.Close()
	err = r.Put(ctx, rec, logPath)
	if ctx.Err() != nil {
		return fmt.Errorf("history %s: not written within %s: %w", url, remoteWriteLimit, err)
	}
	return err
}

// round1 rounds a percentage to one decimal.
func round1(f float64) float64 { return math.Round(f*10) / 10 }

func (a *app) warnHistory(err error) {
	fmt.Fprintf(a.stderr, "raystep: warning: the step's history is not kept (its result is unchanged): %v\n", err)
}

// endReason says why a step ended, in the record's words.
func endReason(err error, code int) string {
	switch {
	case code == exitOK:
		return history.Succeeded
	case code == exitJobFailed:
		return history.Failed
	case code == exitPreempted:
		return history.Preempted
	case code == exitSIGHUP:
		return "cancelled (SIGHUP)"
	case code == exitSIGINT:
		return "cancelled (SIGINT)"
	case code == exitSIGTERM:
		return "cancelled (SIGTERM)"
	case errors.Is(err, runner.ErrDeadline):
		return history.Deadline
	case code == exitUsage:
		return history.Invalid
	}
	return history.Infrastructure
}

// specDigest is the SHA-256 of the resolved spec.
func specDigest(spec *schemas.Spec) string {
	data, err := json.Marshal(spec)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// partitionKey is the Dagster context's partition_key, if any.
func partitionKey(raw json.RawMessage) string {
	var c struct {
		Key string `json:"partition_key"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Key
}

// logsCommand prints a step's driver log from this machine's history.
func (a *app) logsCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs NAME [-f]",
		Short: "Print a step's driver log, while it runs and after its cluster is gone",
		Long: `logs prints the driver log of the step NAME (its submission id, as run,
ls --finished and the Dagster metadata raystep/submission_id show it) as
raystep relayed it: byte for byte up to 4 MiB, beyond that its first and
last 2 MiB with a note of what was left out. It reads this machine's
history (under $XDG_STATE_HOME/raystep/history, else
~/.local/state/raystep/history), written by the steps run here, also while
they run, and then the store the profile's spec.history.url names, where
every step writes its history when it ends (so a KubeRay step run in a
Dagster pod that is gone can be read anywhere). -f keeps printing what a
running step adds until it ends.

` + exitCodesHelp(),
		Example: `  raystep ls --finished --since 24h
  raystep logs raystep-ads-ranking-train-e608cb911d6e`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.logs(cmd, args[0], follow) },
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing a running step's log until it ends")
	return cmd
}

// followPoll is how often logs -f looks for more of a running step's log:
// the file is not a stream.
const followPoll = 250 * time.Millisecond

func (a *app) logs(cmd *cobra.Command, name string, follow bool) error {
	if err := history.CheckName(name); err != nil {
		return &usageError{fmt.Errorf("logs: %w", err)}
	}
	ctx := cmd.Context()
	idx, done, err := a.historyIndex(cmd)
	if err != nil {
		return err
	}
	defer done()
	f, err := idx.OpenLog(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		if rec, gerr := idx.Get(ctx, name); gerr == nil {
			return &usageError{fmt.Errorf("logs %s: the history of %s cluster %s has no driver log: only steps have one", name, rec.Kind, rec.Cluster)}
		}
		return &usageError{fmt.Errorf("logs %s: no step of that name in the history (raystep ls --finished lists those that are)", name)}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		if _, err := io.Copy(a.stdout, f); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		if _, err := idx.Get(ctx, name); err == nil {
			_, err := io.Copy(a.stdout, f) // what came between the last read and the record
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(followPoll):
		}
	}
}

// finishedTable prints ended steps for ls --finished.
func finishedTable(w io.Writer, recs []history.Record, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSPEC\tOWNER\tBACKEND\tENDED\tTOOK\tEXIT\tHOW IT ENDED")
	for _, r := range recs {
		how := r.Reason
		if r.Status != "" && r.Reason != history.Succeeded {
			how += ", job " + r.Status
		}
		code := strconv.Itoa(r.ExitCode)
		if r.ExitCode < 0 {
			code = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%s\t%s\t%s\n", r.Name, r.Spec, dash(r.Owner), r.Backend,
			shortAge(now.Sub(r.Ended)), r.Duration().Round(time.Second), code, strings.ReplaceAll(how, "\t", " "))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortAge is d in its largest unit: 45s, 12m, 3h, 2d.
func shortAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// reapHistory records the steps of this machine whose raystep process died
// without recording how they ended.
func (a *app) reapHistory(now time.Time) error {
	dir, err := a.historyDir()
	if err != nil {
		return nil // no state dir: no history
	}
	reaped, err := dir.Reap(raystepAlive, now)
	for _, r := range reaped {
		fmt.Fprintf(a.stdout, "history %s: recorded as %s (raystep, pid %d, is gone)\n", r.Name, history.Reaped, r.PID)
	}
	return err
}

// raystepAlive reports whether pid is a running raystep: a pid reused by
// another program is not.
func raystepAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err != nil || strings.Contains(string(cmdline), "raystep")
}
