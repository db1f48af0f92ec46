package raysubmit_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/test/raytest"
)

// ray is the one head shared by this package's tests.
var ray = raytest.Shared{Options: rayhead.Options{NumCPUs: 2}}

func TestMain(m *testing.M) {
	code := m.Run()
	ray.Stop()
	os.Exit(code)
}

// jobsURI is the uploaded testdata/jobs package, shared by the tests.
var jobsURI struct {
	once sync.Once
	uri  string
	err  error
}

// headClient returns a client of the shared head with fast polling.
func headClient(t *testing.T) *raysubmit.Client {
	t.Helper()
	return newClient(t, ray.Head(t).DashboardURL())
}

func newClient(t *testing.T, url string) *raysubmit.Client {
	t.Helper()
	c, err := raysubmit.New(raysubmit.Config{BaseURL: url, UserAgent: "raystep/test"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.PollInterval = 200 * time.Millisecond
	c.ReconnectWait = 100 * time.Millisecond
	c.HTTP.RetryWaitMin = 10 * time.Millisecond
	c.HTTP.RetryWaitMax = 200 * time.Millisecond
	return c
}

// jobsDir uploads testdata/jobs once and returns its gcs:// URI.
func jobsDir(t *testing.T, c *raysubmit.Client) string {
	t.Helper()
	jobsURI.once.Do(func() {
		jobsURI.uri, jobsURI.err = c.UploadWorkingDir(ctx(t), "testdata/jobs", raysubmit.PackageOptions{})
	})
	if jobsURI.err != nil {
		t.Fatalf("upload testdata/jobs: %v", jobsURI.err)
	}
	return jobsURI.uri
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

// submit submits r and makes sure the job is gone when the test ends.
func submit(t *testing.T, c *raysubmit.Client, r raysubmit.SubmitRequest) string {
	t.Helper()
	resp, err := c.Submit(ctx(t), r)
	if err != nil {
		t.Fatalf("Submit(%q): %v", r.Entrypoint, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = c.Stop(cctx, resp.SubmissionID)
	})
	return resp.SubmissionID
}
