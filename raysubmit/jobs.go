package raysubmit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Status is a Ray job status.
type Status string

// The statuses a Ray job goes through.
const (
	StatusPending   Status = "PENDING"
	StatusRunning   Status = "RUNNING"
	StatusStopped   Status = "STOPPED"
	StatusSucceeded Status = "SUCCEEDED"
	StatusFailed    Status = "FAILED"
)

// Terminal reports whether the job can no longer change status.
func (s Status) Terminal() bool {
	return s == StatusStopped || s == StatusSucceeded || s == StatusFailed
}

// VersionInfo is the answer of GET /api/version.
type VersionInfo struct {
	// Version is the Jobs API's own version ("4" since Ray added DELETE).
	Version string `json:"version"`
	// RayVersion is the cluster's Ray release, e.g. "2.60.0".
	RayVersion string `json:"ray_version"`
	// RayCommit is the git commit Ray was built from.
	RayCommit string `json:"ray_commit"`
	// SessionName names the head's current session (its temp dir's
	// session_* directory); it changes when the head restarts.
	SessionName string `json:"session_name"`
}

// SubmitRequest describes a job to submit.
type SubmitRequest struct {
	// Entrypoint is the shell command the driver runs.
	Entrypoint string `json:"entrypoint"`
	// SubmissionID names the job; choose it deterministically to make a
	// retried step attach instead of submitting twice. Empty means Submit
	// makes a random one.
	SubmissionID string `json:"submission_id,omitempty"`
	// RuntimeEnv is Ray's runtime_env (working_dir, pip, env_vars, ...).
	RuntimeEnv map[string]any `json:"runtime_env,omitempty"`
	// Metadata is attached to the job and returned by Get.
	Metadata map[string]string `json:"metadata,omitempty"`
	// EntrypointNumCPUs reserves CPUs for the driver.
	EntrypointNumCPUs float64 `json:"entrypoint_num_cpus,omitempty"`
	// EntrypointNumGPUs reserves GPUs for the driver.
	EntrypointNumGPUs float64 `json:"entrypoint_num_gpus,omitempty"`
	// EntrypointMemory reserves memory (bytes) for the driver.
	EntrypointMemory int64 `json:"entrypoint_memory,omitempty"`
	// EntrypointResources reserves custom resources for the driver.
	EntrypointResources map[string]float64 `json:"entrypoint_resources,omitempty"`
}

// SubmitResponse is Ray's answer to a submission.
type SubmitResponse struct {
	// JobID is the field Ray deprecated in favour of SubmissionID; Ray
	// sets it to the submission id.
	JobID string `json:"job_id"`
	// SubmissionID is the id every later call names the job by.
	SubmissionID string `json:"submission_id"`
}

// JobDetails is what Ray knows about a job. Ray 2.60's GET /api/jobs/{id}
// leaves the Entrypoint* fields out; they stay zero then.
type JobDetails struct {
	// Type is "SUBMISSION" for a job submitted through the Jobs API,
	// "DRIVER" for a driver started by other means.
	Type string `json:"type"`
	// JobID is Ray Core's hex job id of the driver, e.g. "02000000"; empty
	// until the driver has started.
	JobID string `json:"job_id"`
	// SubmissionID is the id the job was submitted under.
	SubmissionID string `json:"submission_id"`
	// Status is where the job is; see Status.Terminal.
	Status Status `json:"status"`
	// Entrypoint is the shell command the driver runs.
	Entrypoint string `json:"entrypoint"`
	// Message tells the status in more detail, such as why a job failed.
	Message string `json:"message"`
	// ErrorType classifies a failure, e.g. JOB_ENTRYPOINT_COMMAND_ERROR
	// for an entrypoint that exited non-zero; empty otherwise.
	ErrorType string `json:"error_type"`
	// StartTime is when the job was submitted, in Unix milliseconds; see
	// Started.
	StartTime int64 `json:"start_time"`
	// EndTime is when the job became terminal, in Unix milliseconds; 0
	// while it runs. See Ended.
	EndTime int64 `json:"end_time"`
	// Metadata is the SubmitRequest's metadata.
	Metadata map[string]string `json:"metadata"`
	// RuntimeEnv is the job's runtime_env as Ray resolved it.
	RuntimeEnv map[string]any `json:"runtime_env"`
	// EntrypointNumCPUs is the CPUs reserved for the driver.
	EntrypointNumCPUs float64 `json:"entrypoint_num_cpus"`
	// EntrypointNumGPUs is the GPUs reserved for the driver.
	EntrypointNumGPUs float64 `json:"entrypoint_num_gpus"`
	// EntrypointMemory is the memory (bytes) reserved for the driver.
	EntrypointMemory int64 `json:"entrypoint_memory"`
	// EntrypointResources is the custom resources reserved for the driver.
	EntrypointResources map[string]float64 `json:"entrypoint_resources"`
	// DriverAgentHTTPAddress is the job agent on the driver's node, which
	// serves its log.
	DriverAgentHTTPAddress string `json:"driver_agent_http_address"`
	// DriverNodeID is the Ray node the entrypoint runs on.
	DriverNodeID string `json:"driver_node_id"`
	// DriverExitCode is the entrypoint's exit code; nil until it exited,
	// and for a job stopped before its driver ended.
	DriverExitCode *int `json:"driver_exit_code"`
}

// Started returns the job's start time, zero when unknown.
func (d *JobDetails) Started() time.Time { return msTime(d.StartTime) }

// Ended returns the job's end time, zero when unknown.
func (d *JobDetails) Ended() time.Time { return msTime(d.EndTime) }

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Version returns the dashboard's version information.
func (c *Client) Version(ctx context.Context) (*VersionInfo, error) {
	var v VersionInfo
	if err := c.getJSON(ctx, "/api/version", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Submit submits a job. A submission id Ray has seen before yields
// ErrAlreadySubmitted, except when Submit made the id itself and a retried
// request met its own first attempt, which is reported as success.
func (c *Client) Submit(ctx context.Context, r SubmitRequest) (*SubmitResponse, error) {
	generated := r.SubmissionID == ""
	if generated {
		r.SubmissionID = newSubmissionID()
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode submission: %w", err)
	}
	req, err := c.newRequest(ctx, http.MethodPost, "/api/jobs/", body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var out SubmitResponse
	err = c.do(req, &out)
	if generated && errors.Is(err, ErrAlreadySubmitted) {
		d, gerr := c.Get(ctx, r.SubmissionID)
		if gerr != nil {
			return nil, errors.Join(err, gerr)
		}
		return &SubmitResponse{JobID: d.JobID, SubmissionID: d.SubmissionID}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("submit job %s: %w", r.SubmissionID, err)
	}
	return &out, nil
}

func newSubmissionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "raystep_" + hex.EncodeToString(b[:])
}

// Get returns the details of the job with the given submission (or job) id.
func (c *Client) Get(ctx context.Context, id string) (*JobDetails, error) {
	var d JobDetails
	if err := c.getJSON(ctx, "/api/jobs/"+url.PathEscape(id), &d); err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return &d, nil
}

// List returns every job the cluster knows.
func (c *Client) List(ctx context.Context) ([]JobDetails, error) {
	var jobs []JobDetails
	if err := c.getJSON(ctx, "/api/jobs/", &jobs); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// Logs returns the job's whole log. Prefer Follow for long logs: this
// holds the log in memory.
func (c *Client) Logs(ctx context.Context, id string) (string, error) {
	var out struct {
		Logs string `json:"logs"`
	}
	if err := c.getJSON(ctx, "/api/jobs/"+url.PathEscape(id)+"/logs", &out); err != nil {
		return "", fmt.Errorf("get logs of job %s: %w", id, err)
	}
	return out.Logs, nil
}

// Stop asks Ray to stop the job. It reports false when the job was already
// terminal.
func (c *Client) Stop(ctx context.Context, id string) (bool, error) {
	var out struct {
		Stopped bool `json:"stopped"`
	}
	if err := c.postJSON(ctx, "/api/jobs/"+url.PathEscape(id)+"/stop", &out); err != nil {
		return false, fmt.Errorf("stop job %s: %w", id, err)
	}
	return out.Stopped, nil
}

// Delete deletes a terminal job and its logs. Ray refuses (an *APIError)
// to delete a job that still runs.
func (c *Client) Delete(ctx context.Context, id string) (bool, error) {
	req, err := c.newRequest(ctx, http.MethodDelete, "/api/jobs/"+url.PathEscape(id), nil)
	if err != nil {
		return false, err
	}
	var out struct {
		Deleted bool `json:"deleted"`
	}
	if err := c.do(req, &out); err != nil {
		return false, fmt.Errorf("delete job %s: %w", id, err)
	}
	return out.Deleted, nil
}

// Wait polls the job every PollInterval until its status is terminal and
// returns its final details. It returns ctx's error when ctx ends first.
func (c *Client) Wait(ctx context.Context, id string) (*JobDetails, error) {
	tick := time.NewTicker(c.PollInterval)
	defer tick.Stop()
	for {
		d, err := c.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("wait for job %s: %w", id, err)
		}
		if d.Status.Terminal() {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for job %s (last status %s): %w", id, d.Status, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func (c *Client) getJSON(ctx context.Context, path string, out any) error {
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

func (c *Client) postJSON(ctx context.Context, path string, out any) error {
	req, err := c.newRequest(ctx, http.MethodPost, path, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}
