// Package browser runs Debian's chromium headless for raystep's browser
// tests and hands each test a chromedp tab. It owns the browser process:
// a temporary profile, the DevTools endpoint on a port chromium picks
// (127.0.0.1 only), its own process group, which cleanup kills whole,
// also when the test fails, and a PNG screenshot per test, so a person
// can look at what a test checked. What a test does in the tab is the
// test's.
//
// Screenshots go to t.ArtifactDir() when `go test -artifacts` is given
// (under -outputdir), else to a directory under $TMPDIR/raystep-screenshots
// that is kept after the test; each test logs the path.
package browser

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
)

// Chromium is the browser the tests run: Debian's chromium package.
const Chromium = "/usr/bin/chromium"

// startTimeout bounds how long chromium gets to open its DevTools endpoint,
// stopTimeout how long its processes get to end once killed.
const (
	startTimeout = 90 * time.Second
	stopTimeout  = 30 * time.Second
)

// Tab is one browser tab of a test.
type Tab struct {
	// Ctx is the tab's chromedp context; it ends when the test does.
	Ctx context.Context
	// Dir is where the test's screenshots and chromium's log go.
	Dir string

	t     *testing.T
	proc  *process
	shots int
}

// New starts chromium for t and returns a tab. A missing chromium fails
// the test: the browser tests are part of the suite, never skipped.
// Cleanup saves a last screenshot (final.png), closes the tab and kills
// chromium's process group.
func New(t *testing.T) *Tab {
	t.Helper()
	if _, err := os.Stat(Chromium); err != nil {
		t.Fatalf("browser tests need Debian's chromium at %s (apt-get install -y chromium; .ci/run installs it): %v", Chromium, err)
	}
	dir := outputDir(t)
	t.Logf("browser: screenshots and chromium.log in %s", dir)
	proc, wsURL, err := start(t.TempDir(), t.TempDir(), filepath.Join(dir, "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := proc.kill(); left != nil {
			t.Error(left)
		}
	})
	allocCtx, cancelAlloc := remote.NewAllocator(context.Background(), wsURL, remote.NoModifyURL)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	tab := &Tab{Ctx: ctx, Dir: dir, t: t, proc: proc}
	t.Cleanup(func() {
		tab.Shot("final")
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("browser: open a tab: %v", err)
	}
	return tab
}

// Shot saves a PNG of the whole page as Dir/NN-name.png, numbered in
// order, and logs its path. A failure to take it is a test error.
func (b *Tab) Shot(name string) string {
	b.t.Helper()
	b.shots++
	path := filepath.Join(b.Dir, fmt.Sprintf("%02d-%s.png", b.shots, name))
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		b.t.Errorf("browser: screenshot %s: %v", path, err)
		return ""
	}
	b.t.Logf("browser: screenshot %s", path)
	return path
}

// outputDir is t.ArtifactDir() under `go test -artifacts`, else a new
// directory named after the test that outlives it.
func outputDir(t *testing.T) string {
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	root := filepath.Join(os.TempDir(), "raystep-screenshots")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatalf("browser: %v", err)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(root, name+"-")
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return dir
}

// process is a running chromium: the leader of its own process group.
type process struct {
	cmd     *exec.Cmd
	profile string
	done    chan struct{}
}

// start runs chromium headless with profile as its user data directory,
// tmp as its TMPDIR and its output in logPath, and returns it with its
// DevTools URL once it listens. Chromium makes an org.chromium.Chromium.*
// dir in TMPDIR that only a clean exit removes; the test kills it, and
// testing removes tmp.
func start(profile, tmp, logPath string) (*process, string, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", fmt.Errorf("browser: %w", err)
	}
	cmd := exec.Command(Chromium,
		"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir="+profile,
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"about:blank")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout = logFile
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, "", fmt.Errorf("browser: %w", err)
	}
	// Its own group, so cleanup reaches every helper process; and killed
	// with the test binary's thread, so a killed test leaves none behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, "", fmt.Errorf("browser: start %s: %w", Chromium, err)
	}
	p := &process{cmd: cmd, profile: profile, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		defer logFile.Close()
		sc := bufio.NewScanner(io.TeeReader(stderr, logFile))
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "DevTools listening on "); ok {
				urls <- strings.TrimSpace(u)
			}
		}
		_, _ = io.Copy(logFile, stderr)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case u := <-urls:
		return p, u, nil
	case <-p.done:
		return nil, "", fmt.Errorf("browser: %s exited before listening: %v (log: %s)", Chromium, cmd.ProcessState, logPath)
	case <-timer.C:
		_ = p.kill()
		return nil, "", fmt.Errorf("browser: %s did not listen within %s (log: %s)", Chromium, startTimeout, logPath)
	}
}

// kill kills the process group, waits for the leader, then for every
// process that runs with the test's profile to end (those outside the
// group are killed one by one and reported: they escaped it).
func (p *process) kill() error {
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("browser: kill chromium's process group: %w", err)
	}
	<-p.done
	var escaped []int
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(stopTimeout)
	for {
		left := running(p.profile)
		if len(left) == 0 {
			break
		}
		for _, pid := range left {
			if g, err := syscall.Getpgid(pid); err == nil && g != pgid && !slices.Contains(escaped, pid) {
				escaped = append(escaped, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("browser: chromium processes %v still run %s after the kill", left, stopTimeout)
		}
	}
	if len(escaped) > 0 {
		return fmt.Errorf("browser: chromium processes %v had left their process group", escaped)
	}
	return nil
}

// running lists the live processes whose command line names profile (a
// zombie's command line is empty).
func running(profile string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, path := range procs {
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), "--user-data-dir="+profile) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(path, "/proc/%d/cmdline", &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
