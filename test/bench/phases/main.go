// Command phases measures where a KubeRay step's time goes, phase by phase,
// on the sandbox (a real API server, scheduler and KubeRay operator, kwok
// nodes, a real Ray head):
//
//	make build k8s-bins && go run ./test/bench/phases [-n 3] [-spec FILE]
//
// It starts the sandbox with the API server's audit log on (or uses the
// one whose directory -sandbox names, started with -audit), runs the spec
// n times with `raystep run --backend kuberay --log-format json`, and lines
// raystep's own events up with the audit log's record of who asked the API
// server for what and when. Each phase's wall time is split into its floor,
// what it waits for that is not raystep (kwok's pod stages and the
// scheduler, the operator's reconciles, Ray's job, the pods' graceful
// termination), and raystep's own share: the time between the floor's end
// and raystep acting on it, and raystep's own requests. Medians of n runs.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 3, "steps to run")
	raystep := flag.String("raystep", "bin/raystep", "raystep binary")
	spec := flag.String("spec", "examples/ads_ranking/train.yaml", "the step's spec")
	dir := flag.String("sandbox", "", "directory of a running sandbox started with -audit (default: start one)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, *n, *raystep, *spec, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "phases:", err)
		os.Exit(1)
	}
}

func bench(ctx context.Context, n int, raystep, spec, dir string) (err error) {
	if dir == "" {
		var stop func() error
		if dir, stop, err = startSandbox(ctx); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	env, err := readEnv(filepath.Join(dir, "env"))
	if err != nil {
		return err
	}
	if env.audit == "" {
		return fmt.Errorf("sandbox %s has no audit log: start it with -audit", dir)
	}
	var runs []timeline
	for i := range n {
		tl, err := step(ctx, raystep, spec, env)
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
		runs = append(runs, tl)
		fmt.Fprintf(os.Stderr, "step %d: start to RayJob created %s, last write of others to raystep's ready %s, "+
			"job end to delete %s, all gone to raystep's deleted %s\n", i+1, secs(tl.created.Sub(tl.start)),
			secs(tl.ready.Sub(tl.operatorReady)), secs(tl.deleteAsked.Sub(tl.ended)), secs(tl.deleted.Sub(tl.gone)))
	}
	report(os.Stdout, runs)
	return nil
}

// startSandbox runs the sandbox with its audit log on and returns its
// directory once it is ready, and a function that stops it.
func startSandbox(ctx context.Context) (string, func() error, error) {
	dir, err := os.MkdirTemp("", "raystep-phases-")
	if err != nil {
		return "", nil, err
	}
	// The sandbox is built, then run itself: under `go run`, the SIGINT
	// that stops it also reaches the go command, which then exits 1 however
	// the sandbox ended.
	bin := filepath.Join(dir, "sandbox")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/cluster/sandbox")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", nil, errors.Join(fmt.Errorf("build the sandbox: %w", err), os.RemoveAll(dir))
	}
	cmd := exec.Command(bin, "-audit", "-ui-addr", "", "-dir", dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // the sandbox and what it started
		werr := cmd.Wait()
		return errors.Join(ignoreSignal(werr), os.RemoveAll(dir))
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n') // the sandbox prints its dir once ready
		if err == nil && strings.TrimSpace(line) != dir {
			err = fmt.Errorf("sandbox printed %q, want its directory", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("start sandbox: %w", err), stop())
	}
	return dir, stop, nil
}

func ignoreSignal(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && !ee.Exited() {
		return nil
	}
	return err
}

// sandboxEnv is what the sandbox's env file says.
type sandboxEnv struct {
	vars  []string // KEY=VALUE for raystep
	audit string
	ray   string // the Ray head every head pod's port 8265 forwards to
}

var (
	exportLine = regexp.MustCompile(`^export ([A-Z_]+)='(.*)'$`)
	headLine   = regexp.MustCompile(`is the sandbox's Ray head at (http://\S+?)\.?$`)
)

func readEnv(path string) (sandboxEnv, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return sandboxEnv{}, err
	}
	var e sandboxEnv
	for _, line := range strings.Split(string(data), "\n") {
		if m := exportLine.FindStringSubmatch(line); m != nil {
			e.vars = append(e.vars, m[1]+"="+m[2])
			if m[1] == "SANDBOX_AUDIT_LOG" {
				e.audit = m[2]
			}
		}
		if m := headLine.FindStringSubmatch(line); m != nil {
			e.ray = m[1]
		}
	}
	return e, nil
}

// event is one of raystep's --log-format json events.
type event struct {
	Time    time.Time `json:"time"`
	Phase   string    `json:"phase"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	ID      string    `json:"submission_id"`
}

// timeline is one step's moments, from raystep's events (ev) and the audit
// log (au), and Ray's own record of its job.
type timeline struct {
	start, ready, reached, uploaded, submitted, ended, deleted time.Time // raystep's events
	created, operatorReady, deleteAsked, gone                  time.Time // the audit log
	rayJob                                                     time.Duration
}

func step(ctx context.Context, raystep, spec string, env sandboxEnv) (timeline, error) {
	var tl timeline
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, raystep, "run", "-f", spec, "--backend", "kuberay", "--log-format", "json")
	cmd.Env = append(os.Environ(), env.vars...)
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return tl, fmt.Errorf("raystep run: %w\n%s", err, stderr.String())
	}
	var id string
	for _, line := range strings.Split(stderr.String(), "\n") {
		var e event
		if json.Unmarshal([]byte(line), &e) != nil || e.Kind == "line" {
			continue
		}
		id = cmp(id, e.ID)
		switch {
		case tl.start.IsZero():
			tl.start = e.Time
		case e.Phase == "provision" && strings.HasPrefix(e.Message, "cluster ") && strings.HasSuffix(e.Message, " ready"):
			tl.ready = e.Time
		case e.Phase == "dashboard":
			tl.reached = e.Time
		case e.Phase == "upload":
			tl.uploaded = e.Time
		case e.Phase == "submit":
			tl.submitted = e.Time
		case e.Phase == "run" && strings.HasPrefix(e.Message, "job "+id+" "):
			tl.ended = e.Time
		case e.Phase == "teardown" && strings.HasSuffix(e.Message, " deleted"):
			tl.deleted = e.Time
		}
	}
	if id == "" || tl.ready.IsZero() || tl.submitted.IsZero() || tl.ended.IsZero() || tl.deleted.IsZero() {
		return tl, fmt.Errorf("raystep's events lack a phase:\n%s", stderr.String())
	}
	if tl.uploaded.IsZero() {
		tl.uploaded = tl.reached
	}
	if err := tl.fromAudit(env.audit, id); err != nil {
		return tl, err
	}
	var err error
	tl.rayJob, err = rayJobTime(ctx, env.ray, id)
	return tl, err
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// auditEvent is the part of an API server audit event the bench reads.
type auditEvent struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	Completed time.Time `json:"stageTimestamp"`
	Ref       struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	Status struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// fromAudit finds, for the RayJob id and the objects named after it:
// raystep's create and delete of the RayJob; the last write by anyone
// but raystep before raystep saw the cluster ready (the last pod Ready by
// kwok, the operator's status updates after it), which is what raystep
// waited for; and the last such write after the delete and before
// raystep said the cluster is deleted (the last pod gone after its
// grace, the operator's finalizers removed).
func (tl *timeline) fromAudit(path, id string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var a auditEvent
		if json.Unmarshal(sc.Bytes(), &a) != nil || a.Stage != "ResponseComplete" || !strings.HasPrefix(a.Ref.Name, id) {
			continue
		}
		ours := strings.HasPrefix(a.UserAgent, "raystep/")
		write := a.Verb != "get" && a.Verb != "list" && a.Verb != "watch"
		switch {
		case ours && a.Verb == "create" && a.Ref.Resource == "rayjobs":
			tl.created = a.Received
		case ours && a.Verb == "delete" && a.Ref.Resource == "rayjobs":
			tl.deleteAsked = a.Received
		case !ours && write && tl.deleteAsked.IsZero() && !a.Completed.After(tl.ready) && a.Completed.After(tl.operatorReady):
			tl.operatorReady = a.Completed
		case !ours && write && !tl.deleteAsked.IsZero() && !a.Completed.After(tl.deleted) && a.Completed.After(tl.gone):
			tl.gone = a.Completed
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if tl.created.IsZero() || tl.operatorReady.IsZero() || tl.deleteAsked.IsZero() || tl.gone.IsZero() {
		return fmt.Errorf("audit log %s lacks RayJob %s's create, readiness or deletion", path, id)
	}
	return nil
}

// rayJobTime asks the sandbox's Ray head for the job's own run time.
func rayJobTime(ctx context.Context, ray, id string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ray+"/api/jobs/"+id, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var j struct {
		Start int64 `json:"start_time"`
		End   int64 `json:"end_time"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || j.End == 0 {
		return 0, fmt.Errorf("job %s on %s: no end time (%v)", id, ray, err)
	}
	return time.Duration(j.End-j.Start) * time.Millisecond, nil
}

// row is one phase: its wall time, what it waits for and the floor that
// is, and raystep's share.
type row struct {
	phase, waits string
	wall, floor  func(timeline) time.Duration
}

var rows = []row{
	{"provision", "the operator's reconciles, the scheduler, kwok's pod stages up to Ready",
		func(t timeline) time.Duration { return t.ready.Sub(t.start) },
		func(t timeline) time.Duration { return t.operatorReady.Sub(t.created) }},
	{"dashboard", "raystep's port-forward through the API server, one GET",
		func(t timeline) time.Duration { return t.reached.Sub(t.ready) },
		func(timeline) time.Duration { return 0 }},
	{"upload", "Ray storing the working dir (skipped when Ray has it)",
		func(t timeline) time.Duration { return t.uploaded.Sub(t.reached) },
		func(timeline) time.Duration { return 0 }},
	{"submit", "Ray's POST /api/jobs",
		func(t timeline) time.Duration { return t.submitted.Sub(t.uploaded) },
		func(timeline) time.Duration { return 0 }},
	{"run", "Ray's job, start_time to end_time",
		func(t timeline) time.Duration { return t.ended.Sub(t.submitted) },
		func(t timeline) time.Duration { return t.rayJob }},
	{"teardown", "the pods' graceful termination (kwok: up to their grace period), the operator's finalizers",
		func(t timeline) time.Duration { return t.deleted.Sub(t.ended) },
		func(t timeline) time.Duration { return t.gone.Sub(t.deleteAsked) }},
}

func report(w io.Writer, runs []timeline) {
	fmt.Fprintf(w, "%d KubeRay steps on the sandbox, medians\n\n", len(runs))
	fmt.Fprintln(w, "| phase | wall | floor: what it waits for | floor | raystep's share |")
	fmt.Fprintln(w, "| --- | ---: | --- | ---: | ---: |")
	var total, floor []time.Duration
	for _, r := range rows {
		var walls, floors, ours []time.Duration
		for _, t := range runs {
			walls, floors = append(walls, r.wall(t)), append(floors, r.floor(t))
			ours = append(ours, r.wall(t)-r.floor(t))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.phase, secs(median(walls)), r.waits, secs(median(floors)), secs(median(ours)))
	}
	for _, t := range runs {
		total, floor = append(total, t.deleted.Sub(t.start)), append(floor, t.operatorReady.Sub(t.created)+t.rayJob+t.gone.Sub(t.deleteAsked))
	}
	fmt.Fprintf(w, "| step | %s | | %s | %s |\n", secs(median(total)), secs(median(floor)), secs(median(total)-median(floor)))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
