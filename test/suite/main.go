// Command suite runs raystep's test suite around two session Ray heads
// and counts the heads and control planes the tests start:
//
//	go run ./test/suite [-events FILE] [-no-heads] -- COMMAND [ARG]...
//
// It starts, once for the whole run, a plain Ray head and one with Ray's
// token authentication, and describes each in a file named by
// RAYSTEP_TEST_HEAD and RAYSTEP_TEST_TOKEN_HEAD in COMMAND's environment
// (written when the head is ready: see test/raytest, which every Go
// package and the Python tests' conftest read). COMMAND starts at once,
// so the heads start while it compiles. A test that is not about a
// head's own lifecycle uses these heads instead of starting its own.
//
// Every `ray start --head` of the run goes through a counting ray
// (ray.py, first on PATH and in RAYSTEP_RAY_BIN), which appends a line to
// the events file; test/cluster appends one per control plane. As a
// check on that count, suite also watches for new gcs_server processes
// (one per head, however started) and says when it saw more heads than
// were counted. test/suite/report.py prints the tables.
//
// suite stops its heads when COMMAND has exited and exits with COMMAND's
// code. SIGINT, SIGTERM and SIGHUP are passed on to COMMAND; if suite
// dies anyway, each head's keeper stops its head by itself.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raystep/raystep/rayhead"
)

// countingRay is ray.py, written with the real ray's interpreter and the
// paths filled in.
//
//go:embed ray.py
var countingRay string

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	events := fs.String("events", os.Getenv("RAYSTEP_SUITE_EVENTS"), "file the counts are appended to (default: a new temp file)")
	noHeads := fs.Bool("no-heads", false, "start no session heads: every package starts its own")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: go run ./test/suite [-events FILE] [-no-heads] -- COMMAND [ARG]...")
		return 2
	}
	// logf is called from the session heads' goroutines too: one line at
	// a time, whole.
	var logMu sync.Mutex
	logf := func(format string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(stderr, "suite: "+format+"\n", a...)
	}

	dir, err := os.MkdirTemp("", "raystep-suite-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *events == "" {
		*events = filepath.Join(dir, "events")
	}
	if *events, err = filepath.Abs(*events); err != nil {
		logf("%v", err)
		return 1
	}
	real, err := rayhead.FindRay(os.Getenv("RAYSTEP_RAY_BIN"))
	if err != nil {
		logf("%v", err)
		return 1
	}
	shim, err := writeCountingRay(filepath.Join(dir, "bin"), real, *events)
	if err != nil {
		logf("%v", err)
		return 1
	}

	env := append(os.Environ(),
		"PATH="+filepath.Dir(shim)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"RAYSTEP_RAY_BIN="+shim, "RAYSTEP_SUITE_EVENTS="+*events)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := newHeadWatch()
	go watch.run(ctx)
	var heads []*sessionHead
	if !*noHeads {
		heads = []*sessionHead{
			{name: "plain", env: "RAYSTEP_TEST_HEAD", file: filepath.Join(dir, "head"), done: make(chan struct{})},
			{name: "token-auth", env: "RAYSTEP_TEST_TOKEN_HEAD", file: filepath.Join(dir, "token-head"), token: true,
				done: make(chan struct{})},
		}
		for _, h := range heads {
			env = append(env, h.env+"="+h.file)
			go h.start(ctx, shim, logf)
		}
	}

	code := runCommand(fs.Args(), env, logf)
	cancel()
	for _, h := range heads {
		h.stop(logf)
	}
	counted := countHeads(*events)
	seen := watch.stop()
	logf("ray heads started during the run: %d counted by the counting ray, %d gcs_server processes seen (events: %s)", counted, seen, *events)
	if seen > counted {
		logf("WARNING: %d ray heads started without the counting ray (a ray that is not $RAYSTEP_RAY_BIN or first on PATH)", seen-counted)
	}
	return code
}

// writeCountingRay writes ray.py as dir/ray for the real ray and the
// events file, with ray's own interpreter on its #! line.
func writeCountingRay(dir, real, events string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	body, ok := strings.CutPrefix(countingRay, "#!/usr/bin/env python3\n")
	if !ok {
		return "", errors.New("ray.py does not start with #!/usr/bin/env python3")
	}
	body = strings.NewReplacer(`"@REAL@"`, fmt.Sprintf("%q", real), `"@EVENTS@"`, fmt.Sprintf("%q", events)).Replace(body)
	// The counting ray runs on ray's own interpreter, so that raystep takes
	// the same Python and PATH from it as from ray; a ray that is no
	// Python script (a stand-in in tests) gets python3 from PATH.
	python := rayhead.Interpreter(real)
	if !strings.HasPrefix(filepath.Base(python), "python") {
		var err error
		if python, err = exec.LookPath("python3"); err != nil {
			return "", fmt.Errorf("the counting ray needs python3: %w", err)
		}
	}
	path := filepath.Join(dir, "ray")
	return path, os.WriteFile(path, []byte("#!"+python+"\n"+body), 0o755)
}

// runCommand runs args with env, passing SIGINT, SIGTERM and SIGHUP on,
// and returns its exit code.
func runCommand(args, env []string, logf func(string, ...any)) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		logf("%v", err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	case errors.As(err, &ee):
		logf("%s: %v", args[0], err)
		return 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
	default:
		logf("%s: %v", args[0], err)
		return 1
	}
}

// sessionHead is one head shared by the whole run.
type sessionHead struct {
	name  string
	env   string // the variable that names file
	file  string // key=value lines, written once the head is ready or failed
	token bool

	done chan struct{} // closed when start returned
	head *rayhead.Head // set by start before done closes
}

// startTimeout bounds a session head's start, its turn among the heads
// starting on this machine included.
const startTimeout = 10 * time.Minute

// start starts the head and writes its file: the addresses once it is
// ready, or the error. A head that dies before the run ends is reported,
// and its file then says so, so that packages that start later use heads
// of their own.
func (s *sessionHead) start(ctx context.Context, rayBin string, logf func(string, ...any)) {
	defer close(s.done)
	began := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	h, err := rayhead.Start(startCtx, rayhead.Options{
		RayBin: rayBin, TokenAuth: s.token,
		// Logical CPUs, not cores: many packages' jobs run on it at once.
		NumCPUs: 16, StopTimeout: 5 * time.Second,
		Env:  []string{"RAYSTEP_SUITE_WHO=session"},
		Warn: func(msg string) { logf("%s head: %s", s.name, msg) },
	})
	if err != nil {
		logf("the %s session head did not start: %v", s.name, err)
		writeHeadFile(s.file, []string{"error=" + strings.ReplaceAll(err.Error(), "\n", " ")})
		return
	}
	s.head = h // read by stop after done
	lines := []string{"dashboard=" + h.DashboardURL(), "gcs=" + h.Address(), "temp-dir=" + h.TempDir()}
	if s.token {
		lines = append(lines, "token-file="+h.TokenFile())
	}
	if err := writeHeadFile(s.file, lines); err != nil {
		logf("write %s: %v", s.file, err)
	}
	logf("%s session head ready in %s: %s", s.name, time.Since(began).Round(100*time.Millisecond), h.DashboardURL())
	select {
	case <-h.Done():
		logf("the %s session head died mid-run; packages that start from now on start their own:\n%s", s.name, h.Output())
		writeHeadFile(s.file, []string{"error=the session head died mid-run"})
	case <-ctx.Done():
	}
}

// stop stops the head, if it started, once its start has returned.
func (s *sessionHead) stop(logf func(string, ...any)) {
	<-s.done
	if s.head == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.head.Stop(ctx); err != nil {
		logf("stop the %s session head: %v", s.name, err)
	}
}

// writeHeadFile writes lines to path atomically: a reader sees all of
// them or no file.
func writeHeadFile(path string, lines []string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
