package raysubmit_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/raystep/raystep/raysubmit"
)

func TestVersion(t *testing.T) {
	c := headClient(t)
	v, err := c.Version(ctx(t))
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if !strings.HasPrefix(v.RayVersion, "2.") {
		t.Errorf("RayVersion = %q, want 2.x", v.RayVersion)
	}
}

func TestJobOutcomes(t *testing.T) {
	t.Parallel()
	c := headClient(t)
	exit3 := 3
	exit0 := 0
	tests := []struct {
		name       string
		entrypoint string
		metadata   map[string]string
		cpus       float64
		memory     int64
		want       raysubmit.Status
		wantExit   *int
		wantMsg    string
		wantLogs   string
	}{
		{
			name:       "succeeds",
			entrypoint: `python -c "print('all good')"`,
			metadata:   map[string]string{"owner": "ads"},
			cpus:       0.5,
			memory:     64 << 20,
			want:       raysubmit.StatusSucceeded,
			wantExit:   &exit0,
			wantLogs:   "all good\n",
		},
		{
			name:       "fails",
			entrypoint: `python -c "import sys; print('about to fail'); sys.exit(3)"`,
			want:       raysubmit.StatusFailed,
			wantExit:   &exit3,
			wantMsg:    "exit code 3",
			wantLogs:   "about to fail\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := submit(t, c, raysubmit.SubmitRequest{
				Entrypoint: tt.entrypoint, Metadata: tt.metadata,
				EntrypointNumCPUs: tt.cpus, EntrypointMemory: tt.memory,
			})
			var logs strings.Builder
			if _, err := c.Follow(ctx(t), id, &logs, nil); err != nil {
				t.Fatalf("Follow: %v", err)
			}
			d, err := c.Wait(ctx(t), id)
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if d.Status != tt.want || !d.Status.Terminal() {
				t.Errorf("status = %s, want %s (message %q)", d.Status, tt.want, d.Message)
			}
			if diff := cmp.Diff(tt.wantExit, d.DriverExitCode); diff != "" {
				t.Errorf("driver exit code (-want +got):\n%s", diff)
			}
			if !strings.Contains(d.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", d.Message, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.wantLogs, driverOutput(t, logs.String())); diff != "" {
				t.Errorf("followed logs (-want +got):\n%s", diff)
			}
			for k, v := range tt.metadata {
				if d.Metadata[k] != v {
					t.Errorf("metadata[%s] = %q, want %q", k, d.Metadata[k], v)
				}
			}
			if d.Ended().Before(d.Started()) || d.Started().IsZero() {
				t.Errorf("start %v, end %v: want start <= end", d.Started(), d.Ended())
			}
		})
	}
}

func TestStopLongJob(t *testing.T) {
	t.Parallel()
	c := headClient(t)
	id := submit(t, c, raysubmit.SubmitRequest{Entrypoint: `python -c "import time; print('sleeping', flush=True); time.sleep(600)"`})
	waitStatus(t, c, id, raysubmit.StatusRunning)
	stopped, err := c.Stop(ctx(t), id)
	if err != nil || !stopped {
		t.Fatalf("Stop = %v, %v; want true, nil", stopped, err)
	}
	d, err := c.Wait(ctx(t), id)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if d.Status != raysubmit.StatusStopped {
		t.Errorf("status = %s, want STOPPED", d.Status)
	}
	// Ray says stopped=true while the job's supervisor actor lives, and
	// the supervisor exits a moment after it records STOPPED: wait for
	// Ray to report the job as no longer running, not for a guessed time.
	for tries := 1; ; tries++ {
		again, err := c.Stop(ctx(t), id)
		if err != nil {
			t.Fatalf("Stop of a stopped job: %v", err)
		}
		if !again {
			t.Logf("Stop of the STOPPED job said false at try %d", tries)
			return
		}
		select {
		case <-ctx(t).Done():
			t.Fatalf("Stop of job %s still true after it is STOPPED", id)
		case <-time.After(c.PollInterval):
		}
	}
}

func TestDeleteJob(t *testing.T) {
	t.Parallel()
	c := headClient(t)
	id := submit(t, c, raysubmit.SubmitRequest{Entrypoint: `python -c "print(1)"`})
	if _, err := c.Wait(ctx(t), id); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	deleted, err := c.Delete(ctx(t), id)
	if err != nil || !deleted {
		t.Fatalf("Delete = %v, %v; want true, nil", deleted, err)
	}
	// Ray's job manager watches each job's supervisor actor. When it
	// notices the actor's exit only after the delete, it finds no record,
	// takes the job for one whose supervisor died and writes a FAILED
	// record for it ("Entrypoint not found."): a deleted job comes back,
	// once. So: until Get and List both do not know the job, delete again
	// what came back.
	for deletes := 1; ; deletes++ {
		_, getErr := c.Get(ctx(t), id)
		jobs, err := c.List(ctx(t))
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		listed := slices.ContainsFunc(jobs, func(j raysubmit.JobDetails) bool { return j.SubmissionID == id })
		if errors.Is(getErr, raysubmit.ErrNotFound) && !listed {
			t.Logf("job gone after %d delete(s)", deletes)
			return
		}
		if getErr != nil && !errors.Is(getErr, raysubmit.ErrNotFound) {
			t.Fatalf("Get after Delete: %v", getErr)
		}
		if deletes == 5 {
			t.Fatalf("job %s still known after %d deletes (Get: %v, listed: %v)", id, deletes, getErr, listed)
		}
		if _, err := c.Delete(ctx(t), id); err != nil && !errors.Is(err, raysubmit.ErrNotFound) {
			t.Fatalf("Delete again: %v", err)
		}
	}
}

func TestDeleteRunningJobRefused(t *testing.T) {
	t.Parallel()
	c := headClient(t)
	id := submit(t, c, raysubmit.SubmitRequest{Entrypoint: `python -c "import time; time.sleep(600)"`})
	_, err := c.Delete(ctx(t), id)
	var apiErr *raysubmit.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Body, "non-terminal state") {
		t.Errorf("Delete of a running job: error = %v, want an APIError saying the job is not terminal", err)
	}
}

func TestDuplicateSubmissionAttaches(t *testing.T) {
	t.Parallel()
	c := headClient(t)
	id := fmt.Sprintf("raystep-dup-%d", time.Now().UnixNano())
	req := raysubmit.SubmitRequest{Entrypoint: `python -c "print('only once')"`, SubmissionID: id}
	submit(t, c, req)
	_, err := c.Submit(ctx(t), req)
	if !errors.Is(err, raysubmit.ErrAlreadySubmitted) {
		t.Fatalf("second Submit: error = %v, want ErrAlreadySubmitted", err)
	}
	var logs strings.Builder
	if _, err := c.Follow(ctx(t), id, &logs, nil); err != nil {
		t.Fatalf("attach with Follow: %v", err)
	}
	d, err := c.Wait(ctx(t), id)
	if err != nil || d.Status != raysubmit.StatusSucceeded {
		t.Fatalf("attach with Wait = %v, %v; want SUCCEEDED", d, err)
	}
	if diff := cmp.Diff("only once\n", driverOutput(t, logs.String())); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}

func TestUnknownJob(t *testing.T) {
	c := headClient(t)
	if _, err := c.Get(ctx(t), "raystep-no-such-job"); !errors.Is(err, raysubmit.ErrNotFound) {
		t.Errorf("Get: error = %v, want ErrNotFound", err)
	}
	if _, err := c.Follow(ctx(t), "raystep-no-such-job", &strings.Builder{}, nil); !errors.Is(err, raysubmit.ErrNotFound) {
		t.Errorf("Follow: error = %v, want ErrNotFound", err)
	}
}

func TestWorkingDirImport(t *testing.T) {
	t.Parallel()
	c := headClient(t)
	dir := t.TempDir()
	files := map[string]string{
		"helper_mod.py":      "GREETING = 'hello from the working dir'\n",
		"main.py":            "import os, helper_mod\nprint(helper_mod.GREETING)\nprint(sorted(os.listdir('.')))\n",
		".gitignore":         "ignored_by_git.txt\n",
		"ignored_by_git.txt": "secret\n",
		"skipme/big.bin":     "not uploaded\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	uri, err := c.UploadWorkingDir(ctx(t), dir, raysubmit.PackageOptions{Excludes: []string{"skipme/"}})
	if err != nil {
		t.Fatalf("UploadWorkingDir: %v", err)
	}
	if !strings.HasPrefix(uri, "gcs://_ray_pkg_") || !strings.HasSuffix(uri, ".zip") {
		t.Errorf("URI = %q, want gcs://_ray_pkg_<hash>.zip", uri)
	}
	id := submit(t, c, raysubmit.SubmitRequest{
		Entrypoint: "python main.py",
		RuntimeEnv: map[string]any{"working_dir": uri},
	})
	var logs strings.Builder
	if _, err := c.Follow(ctx(t), id, &logs, nil); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	want := "hello from the working dir\n['.gitignore', 'helper_mod.py', 'main.py']\n"
	if diff := cmp.Diff(want, driverOutput(t, logs.String())); diff != "" {
		t.Errorf("job output (-want +got):\n%s", diff)
	}
}

// waitStatus polls until the job reaches want.
func waitStatus(t *testing.T, c *raysubmit.Client, id string, want raysubmit.Status) {
	t.Helper()
	for {
		d, err := c.Get(ctx(t), id)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if d.Status == want {
			return
		}
		if d.Status.Terminal() {
			t.Fatalf("job %s is %s (%s), want %s", id, d.Status, d.Message, want)
		}
		select {
		case <-ctx(t).Done():
			t.Fatalf("job %s still %s", id, d.Status)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// driverOutput returns what the entrypoint printed, without the lines Ray
// adds to a job log (which may land before or after the driver's first
// output: Ray flushes its "Running entrypoint" line after starting it).
func driverOutput(t *testing.T, log string) string {
	t.Helper()
	var out strings.Builder
	sawEntrypoint := false
	for line := range strings.Lines(log) {
		if rayLine(line) {
			sawEntrypoint = sawEntrypoint || strings.HasPrefix(line, "Running entrypoint for job ")
			continue
		}
		out.WriteString(line)
	}
	if !sawEntrypoint {
		t.Errorf("job log has no \"Running entrypoint\" line:\n%s", log)
	}
	return out.String()
}

// rayLine reports whether a job-log line was written by Ray itself.
func rayLine(line string) bool {
	return strings.HasPrefix(line, "Running entrypoint for job ") ||
		rayLogLine.MatchString(line)
}

var rayLogLine = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\t[A-Z]+ \S+\.py:\d+ -- `)
