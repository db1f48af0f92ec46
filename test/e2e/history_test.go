package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raystep/raystep/test/browser"
	"github.com/raystep/raystep/test/s3test"
)

// finished is what ls --finished -o json says of a step.
type finished struct {
	Name     string             `json:"name"`
	Kind     string             `json:"kind"`
	Spec     string             `json:"spec"`
	Reason   string             `json:"reason"`
	ExitCode int                `json:"exit_code"`
	Status   string             `json:"status"`
	Phases   map[string]float64 `json:"phases"`
	Log      struct{ Bytes, Kept int64 }
	// Utilization is each node's use while the job ran.
	Utilization []struct {
		Node    string
		Samples int
		CPU     struct{ Mean, Peak float64 }
		Memory  struct{ Mean, Peak float64 }
	}
}

// finishedSteps runs ls --finished -o json in state.
func finishedSteps(t *testing.T, state string) []finished {
	t.Helper()
	code, out, errOut := runRay(t, map[string]string{"XDG_STATE_HOME": state}, "ls", "--finished", "-o", "json")
	var fs []finished
	if err := json.Unmarshal([]byte(out), &fs); code != 0 || err != nil {
		t.Fatalf("ls --finished -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return fs
}

// TestRunKeepsHistory: after a step on an existing head ended, succeeded
// or failed, ls --finished shows how, and logs prints its driver log byte
// for byte as run relayed it, an unterminated last line included.
func TestRunKeepsHistory(t *testing.T) {
	t.Parallel()
	h := ray.Head(t)
	state := t.TempDir()
	env := map[string]string{"RAY_ADDRESS": h.DashboardURL(), "XDG_STATE_HOME": state}
	steps := []struct {
		entrypoint, reason string
		code               int
	}{
		{`python -c "import sys; [print('line', i) for i in range(500)]; sys.stdout.write('no newline')"`, "succeeded", exitOK},
		{`python -c "print('about to fail', flush=True); raise SystemExit(3)"`, "failed", exitJobFailed},
	}
	var stdouts []string
	for _, s := range steps {
		code, stdout, stderr := runRay(t, env, "run", "-f", train, "--set", "spec.entrypoint="+s.entrypoint)
		if code != s.code {
			t.Fatalf("%s: exit %d, want %d\n%s", s.entrypoint, code, s.code, stderr)
		}
		stdouts = append(stdouts, stdout)
	}
	fs := finishedSteps(t, state)
	if len(fs) != 2 {
		t.Fatalf("ls --finished lists %d steps, want 2: %+v", len(fs), fs)
	}
	for i, f := range []finished{fs[1], fs[0]} { // the latest first
		if f.Reason != steps[i].reason || f.ExitCode != steps[i].code || f.Phases["run"] <= 0 {
			t.Errorf("step %d recorded as %+v, want reason %s, exit %d and its run phase", i, f, steps[i].reason, steps[i].code)
		}
		code, log, errOut := runRay(t, map[string]string{"XDG_STATE_HOME": state}, "logs", f.Name)
		if code != 0 || log != stdouts[i] {
			t.Errorf("logs %s: exit %d, %d bytes; run relayed %d bytes (%s)\nlogs: %q\nrun:  %q", f.Name, code, len(log),
				len(stdouts[i]), errOut, tail(log), tail(stdouts[i]))
		}
		if f.Log.Bytes != int64(len(stdouts[i])) || f.Log.Kept != f.Log.Bytes {
			t.Errorf("step %d's record counts %+v of the log, run relayed %d bytes", i, f.Log, len(stdouts[i]))
		}
	}
	for i := range 500 {
		if !strings.Contains(stdouts[0], fmt.Sprintf("line %d\n", i)) {
			t.Fatalf("run lost line %d: ...%q", i, tail(stdouts[0]))
		}
	}
	// Ray writes its "Running entrypoint" line through a buffer it flushes
	// once the entrypoint's process started: a quick job's output can be
	// in the log before it (seen on a busy machine), and then that line
	// ends the job's unterminated one.
	if strings.Contains(stdouts[0], "line 499\nno newlineRunning entrypoint for job ") {
		t.Logf("Ray wrote its entrypoint line after the job's output; the job's last line was not the log's last")
	} else if !strings.HasSuffix(stdouts[0], "line 499\nno newline\n") { // run ends the last line
		t.Errorf("run lost the unterminated last line: %q", tail(stdouts[0]))
	}
}

func tail(s string) string { return s[max(0, len(s)-80):] }

// TestSIGKILLedStepIsReapedIntoHistory: a step whose raystep process was
// SIGKILLed mid-run cannot record how it ended; the next gc on the machine
// records it as reaped, and its driver log, up to the kill, stays
// readable. (It runs on the shared head, which outlives the kill: the
// test stops the job itself.)
func TestSIGKILLedStepIsReapedIntoHistory(t *testing.T) {
	t.Parallel()
	h := ray.Head(t)
	state, home := t.TempDir(), t.TempDir()
	env := childEnv("RAY_ADDRESS="+h.DashboardURL(), "XDG_STATE_HOME="+state, "HOME="+home, "KUBECONFIG=", "RAYSTEP_BACKEND=local")
	cmd := exec.Command(raystepBin, "run", "-f", train, "--set", "spec.entrypointResources.cpus=0.1",
		"--set", `spec.entrypoint=python -c "import time; print('started', flush=True); time.sleep(600)"`)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	var relayed strings.Builder
	for lines.Scan() {
		relayed.WriteString(lines.Text() + "\n")
		if lines.Text() == "started" {
			break
		}
	}
	if lines.Err() != nil || lines.Text() != "started" {
		t.Fatalf("the job never printed 'started' (%v):\n%s", lines.Err(), stderr.String())
	}
	// raystep writes a chunk to stdout, then to the history: kill it once
	// the history has the line too.
	waitForFile(t, filepath.Join(state, "raystep", "history", "*", "driver.log"), "started\n")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() { // what raystep relayed before it died
		relayed.WriteString(lines.Text() + "\n")
	}
	_ = cmd.Wait()

	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(raystepBin, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("raystep %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if got := run("ls", "--finished"); strings.Count(got, "\n") != 1 {
		t.Errorf("before gc, ls --finished lists the killed step:\n%s", got)
	}
	out := run("gc")
	fs := finishedSteps(t, state)
	if len(fs) != 1 || fs[0].Reason != "reaped by gc" || fs[0].ExitCode != -1 || !strings.Contains(out, "history "+fs[0].Name+": recorded as reaped by gc") {
		t.Fatalf("after gc: %+v\ngc said:\n%s", fs, out)
	}
	t.Cleanup(func() { stopJob(t, h.DashboardURL(), fs[0].Name) })
	// A kill between the two writes of a chunk leaves the history without
	// its last chunk, never with more than stdout got.
	if log := run("logs", fs[0].Name); !strings.Contains(log, "started\n") || !strings.HasPrefix(relayed.String(), log) {
		t.Errorf("logs of the killed step: %q, want a prefix of what it relayed before the kill, with 'started': %q", log, relayed.String())
	}
}

// waitForFile waits until a file matching pattern holds want.
func waitForFile(t *testing.T, pattern, want string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond) // a file is not a stream
	defer tick.Stop()
	bound := time.After(time.Minute)
	for {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), want) {
				return
			}
		}
		select {
		case <-tick.C:
		case <-bound:
			t.Fatalf("no file %s holds %q within a minute", pattern, want)
		}
	}
}

// stopJob stops a job the test left running on a shared head.
func stopJob(t *testing.T, dashboard, id string) {
	resp, err := http.Post(dashboard+"/api/jobs/"+id+"/stop", "application/json", nil)
	if err != nil {
		t.Logf("stop job %s: %v", id, err)
		return
	}
	_ = resp.Body.Close()
}

// TestHistoryInObjectStorage: a step whose profile names a store writes
// its history there when it ends; a second process with no local state at
// all (as a fresh Dagster pod, or a laptop) lists it and prints its log
// byte for byte. A store nobody answers at costs the step a warning,
// never its result.
func TestHistoryInObjectStorage(t *testing.T) {
	t.Parallel()
	h := ray.Head(t)
	srv := s3test.Start(t)
	srv.CreateBucket(t, "raystep-history")
	profile := s3test.Profile(t, "../../examples/platform.yaml", `url: "`+srv.URL("raystep-history", "ml-ads")+`"`, "keep: 72h")
	env := map[string]string{"RAY_ADDRESS": h.DashboardURL(), "XDG_STATE_HOME": t.TempDir(), "RAYSTEP_PROFILE": profile}
	for _, kv := range s3test.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// The step's first read of the nodes, a second into the run, only marks
	// where its counting starts. The job runs until the head has reported
	// its figures three times since the job started (a first read answered
	// up to 10 s late still precedes the third), then for longer than the
	// step's 10 s between reads: a read of the step's meets a report newer
	// than its first, whatever the machine's speed.
	code, stdout, stderr := runRay(t, env, "run", "-f", train,
		"--set", `spec.entrypoint=python -c "import json, time, urllib.request as u; t = time.time(); `+
			`[print('epoch', i, 'loss', 1/(i+1)) for i in range(300)]; `+
			`now = lambda: max(n['now'] for n in json.load(u.urlopen('`+h.DashboardURL()+`/nodes?view=summary'))['data']['summary']); `+
			`fresh = lambda x: next(n for n in iter(now, None) if n > x or time.sleep(0.5)); `+
			`fresh(fresh(fresh(t))); time.sleep(14); raise SystemExit(4)"`)
	if code != exitJobFailed || strings.Contains(stderr, "warning: the step's history") {
		t.Fatalf("run: exit %d, want %d and no history warning\n%s", code, exitJobFailed, stderr)
	}
	if keys := srv.Keys(t, "raystep-history"); len(keys) != 2 || !strings.HasPrefix(keys[0], "ml-ads/raystep-") {
		t.Fatalf("the bucket holds %q, want the step's record and log under ml-ads/", keys)
	}

	elsewhere := maps.Clone(env)
	elsewhere["XDG_STATE_HOME"], elsewhere["HOME"] = t.TempDir(), t.TempDir()
	delete(elsewhere, "RAY_ADDRESS")
	code, out, errOut := runRay(t, elsewhere, "ls", "--finished", "-o", "json")
	var fs []finished
	if err := json.Unmarshal([]byte(out), &fs); code != 0 || err != nil || len(fs) != 1 {
		t.Fatalf("ls --finished -o json elsewhere: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if fs[0].Reason != "failed" || fs[0].ExitCode != exitJobFailed || fs[0].Status != "FAILED" {
		t.Errorf("the store's record: %+v, want failed, exit %d, job FAILED", fs[0], exitJobFailed)
	}
	// The step sampled its head while the job ran.
	if u := fs[0].Utilization; len(u) != 1 || !strings.HasSuffix(u[0].Node, "(head)") || u[0].Samples < 1 ||
		u[0].Memory.Peak <= 0 || u[0].Memory.Peak > 100 || u[0].CPU.Peak < u[0].CPU.Mean {
		t.Errorf("the record's utilization: %+v, want the head's, sampled at least once", u)
	}
	if code, log, errOut := runRay(t, elsewhere, "logs", fs[0].Name); code != 0 || log != stdout {
		t.Errorf("logs %s elsewhere: exit %d, %d bytes; run relayed %d (%s)", fs[0].Name, code, len(log), len(stdout), errOut)
	}

	// A fresh raystep ui there, with no local state, shows the step in its
	// History view, and its page shows the log and the utilization.
	var uiEnv []string
	for k, v := range elsewhere {
		uiEnv = append(uiEnv, k+"="+v)
	}
	base := startUIWith(t, raystepBin, childEnv(append(uiEnv, "KUBECONFIG=", "RAYSTEP_BACKEND=local")...))
	tab := browser.New(t)
	ctx, cancel := context.WithTimeout(tab.Ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"history")); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`document.querySelector('#history tr[data-name=%q]')`, fs[0].Name)
	awaitPage(ctx, t, tab, "the step in the History view", row+` !== null && `+row+`.textContent.includes("failed, job FAILED")`)
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](row+`.querySelector("a").href`))
	if err != nil || href != base+"history/"+fs[0].Name+"/" {
		t.Fatalf("the step's link in the History view: %q, %v", href, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(href)); err != nil { // as a click would
		t.Fatal(err)
	}
	awaitPage(ctx, t, tab, "the step's log and utilization", `document.getElementById("log") !== null &&
		document.getElementById("log").textContent.includes("epoch 299 loss") &&
		document.querySelector("#utilization tbody td").textContent.endsWith("(head)")`)
	tab.Shot("history-step")

	// The store goes away: the next step's result is its own.
	gone := s3test.Profile(t, "../../examples/platform.yaml", `url: "s3://raystep-history/ml-ads?endpoint=http://`+closedPort(t)+`&use_path_style=true&region=us-east-1&disable_https=true"`)
	env["RAYSTEP_PROFILE"] = gone
	code, _, stderr = runRay(t, env, "run", "-f", train, "--set", `spec.entrypoint=python -c "print('ok')"`)
	if code != exitOK || !strings.Contains(stderr, "warning: the step's history is not kept (its result is unchanged)") ||
		!strings.Contains(stderr, "s3://raystep-history/ml-ads") {
		t.Errorf("run with an unreachable store: exit %d, want 0 and a warning naming the store\n%s", code, stderr)
	}
}
