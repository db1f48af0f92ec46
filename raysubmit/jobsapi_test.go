package raysubmit_test

// Tests of the Jobs client against httptest servers that answer the way
// Ray 2.60's dashboard does (ray/dashboard/modules/job/job_head.py): they
// need no Ray and pay no head start.

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/raystep/raystep/raysubmit"
)

// reply answers one request of a scripted server.
type reply func(w http.ResponseWriter, r *http.Request)

// answer replies with status and body.
func answer(status int, body string) reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// drop closes the connection without an answer, as a reset does.
func drop(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// scripted serves the i-th request with replies[i], the last reply again
// once they run out, and counts the requests.
func scripted(t *testing.T, replies ...reply) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		replies[min(i, len(replies)-1)](w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

const (
	accepted = `{"job_id":"02000000","submission_id":"train-1"}`
	// agentHungUp is the head's 500 when the job agent closed the connection
	// it forwarded a request on, as Ray 2.60 words it.
	agentHungUp = "Traceback (most recent call last):\n  File \"ray/dashboard/modules/job/job_head.py\", line 419, in submit_job\n" +
		"aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n"
	duplicate = "Traceback (most recent call last):\nValueError: Job with submission_id train-1 already exists. " +
		"Please use a different submission_id.\n"
)

// TestSubmitRetryPolicy submits through servers that fail in each way
// CheckRetry knows: what says "not now" is tried again until Ray answers,
// what is an answer comes back at once as the error callers branch on.
func TestSubmitRetryPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		replies  []reply
		attempts int32
		wantErr  error  // errors.Is; nil with wantMsg empty means success
		wantMsg  string // the whole error
	}{
		{name: "503 twice, then accepted", attempts: 3,
			replies: []reply{answer(503, "busy"), answer(503, "busy"), answer(200, accepted)}},
		{name: "502 and 504, then accepted", attempts: 3,
			replies: []reply{answer(502, "bad gateway"), answer(504, "timeout"), answer(200, accepted)}},
		{name: "no job agent yet, then accepted", attempts: 2,
			replies: []reply{answer(500, "No available agent to submit job, please try again later."), answer(200, accepted)}},
		{name: "connection reset, then accepted", attempts: 2, replies: []reply{drop, answer(200, accepted)}},
		{name: "agent hung up, then accepted", attempts: 2, replies: []reply{answer(500, agentHungUp), answer(200, accepted)}},
		// The agent may have started the job before it hung up: the retry
		// then meets it, and the step attaches.
		{name: "agent hung up after acting, then the id is taken", attempts: 2,
			replies: []reply{answer(500, agentHungUp), answer(500, duplicate)},
			wantErr: raysubmit.ErrAlreadySubmitted, wantMsg: "submit job train-1: POST /api/jobs/: submission id already used"},
		{name: "400 is Ray's answer", attempts: 1,
			replies: []reply{answer(400, "Traceback (most recent call last):\nTypeError: bad entrypoint_num_cpus\n")},
			wantMsg: "submit job train-1: POST /api/jobs/: HTTP 400: Traceback (most recent call last):\nTypeError: bad entrypoint_num_cpus"},
		{name: "401 is Ray's answer", attempts: 1, replies: []reply{answer(401, "Unauthorized")},
			wantMsg: "submit job train-1: POST /api/jobs/: HTTP 401: Unauthorized"},
		{name: "500 without the agent message is Ray's answer", attempts: 1,
			replies: []reply{answer(500, "RuntimeError: boom")},
			wantMsg: "submit job train-1: POST /api/jobs/: HTTP 500: RuntimeError: boom"},
		{name: "id already used (400)", attempts: 1, replies: []reply{answer(400, duplicate)},
			wantErr: raysubmit.ErrAlreadySubmitted, wantMsg: "submit job train-1: POST /api/jobs/: submission id already used"},
		{name: "id already used (500, older Ray)", attempts: 1, replies: []reply{answer(500, duplicate)},
			wantErr: raysubmit.ErrAlreadySubmitted, wantMsg: "submit job train-1: POST /api/jobs/: submission id already used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, n := scripted(t, tt.replies...)
			c := newClient(t, srv.URL)
			resp, err := c.Submit(ctx(t), raysubmit.SubmitRequest{Entrypoint: "python train.py", SubmissionID: "train-1"})
			if got := n.Load(); got != tt.attempts {
				t.Errorf("requests = %d, want %d", got, tt.attempts)
			}
			if tt.wantErr == nil && tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Submit: %v", err)
				}
				if diff := cmp.Diff(&raysubmit.SubmitResponse{JobID: "02000000", SubmissionID: "train-1"}, resp); diff != "" {
					t.Errorf("response (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || err.Error() != tt.wantMsg {
				t.Fatalf("Submit error = %v, want %q", err, tt.wantMsg)
			}
			var apiErr *raysubmit.APIError
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) || tt.wantErr == nil && !errors.As(err, &apiErr) {
				t.Errorf("Submit error = %#v, want %v or an *APIError", err, tt.wantErr)
			}
		})
	}
}

// TestSubmitRetriesRefusedConnection: a dashboard that refuses
// connections is tried again, and one that comes up meanwhile takes the
// job; one that never does ends in the refused connection, not a hang.
func TestSubmitRetriesRefusedConnection(t *testing.T) {
	t.Parallel()
	for _, comesUp := range []bool{true, false} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close() // nothing listens there now: connections are refused
		c := newClient(t, "http://"+addr)
		c.HTTP.RetryMax = 2
		var attempts int
		var once sync.Once
		c.HTTP.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, attempt int) {
			attempts++
			if attempt == 1 && comesUp {
				once.Do(func() { serveAt(t, addr, answer(200, accepted)) })
			}
		}
		_, err = c.Submit(ctx(t), raysubmit.SubmitRequest{Entrypoint: "python train.py", SubmissionID: "train-1"})
		switch {
		case comesUp && err != nil:
			t.Errorf("Submit to a dashboard that came up on the second try: %v", err)
		case !comesUp && !errors.Is(err, syscall.ECONNREFUSED):
			t.Errorf("Submit to a dashboard that never came up = %v, want the refused connection", err)
		case !comesUp && attempts != 3:
			t.Errorf("attempts = %d, want 3 (RetryMax 2)", attempts)
		}
	}
}

// serveAt serves r on addr until the test ends.
func serveAt(t *testing.T, addr string, r reply) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s again: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(r))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
}

// TestSubmitGeneratedIDMeetsItsFirstAttempt: Ray took a submission whose
// answer was lost; the retry is refused as a duplicate of Submit's own id,
// and Submit reports the job the first attempt created.
func TestSubmitGeneratedIDMeetsItsFirstAttempt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			var body struct {
				SubmissionID string `json:"submission_id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			ids = append(ids, body.SubmissionID)
			if len(ids) == 1 {
				drop(w, r) // Ray took the job; the client never heard
				return
			}
			answer(400, "ValueError: Job with submission_id "+body.SubmissionID+
				" already exists. Please use a different submission_id.")(w, r)
		default:
			_, _ = io.WriteString(w, `{"job_id":"03000000","submission_id":"`+ids[0]+`","status":"PENDING"}`)
		}
	}))
	t.Cleanup(srv.Close)
	resp, err := newClient(t, srv.URL).Submit(ctx(t), raysubmit.SubmitRequest{Entrypoint: "python train.py"})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Fatalf("submission ids sent = %q, want the same one twice", ids)
	}
	if diff := cmp.Diff(&raysubmit.SubmitResponse{JobID: "03000000", SubmissionID: ids[0]}, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// TestGetDecodesJobDetails reads each status Ray reports and the fields
// the runner uses from it: exit code, times, message.
func TestGetDecodesJobDetails(t *testing.T) {
	t.Parallel()
	start, end := time.UnixMilli(1764590400123), time.UnixMilli(1764590460456)
	three := 3
	tests := []struct {
		status   string
		body     string
		terminal bool
		exit     *int
		ended    time.Time
	}{
		{"PENDING", `"start_time":1764590400123,"end_time":null,"driver_exit_code":null`, false, nil, time.Time{}},
		{"RUNNING", `"start_time":1764590400123,"end_time":null,"driver_exit_code":null`, false, nil, time.Time{}},
		{"SUCCEEDED", `"start_time":1764590400123,"end_time":1764590460456,"driver_exit_code":0`, true, new(int), end},
		{"FAILED", `"start_time":1764590400123,"end_time":1764590460456,"driver_exit_code":3`, true, &three, end},
		{"STOPPED", `"start_time":1764590400123,"end_time":1764590460456,"driver_exit_code":null`, true, nil, end},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			t.Parallel()
			body := `{"type":"SUBMISSION","job_id":"02000000","submission_id":"train-1","driver_info":null,` +
				`"status":"` + tt.status + `","entrypoint":"python train.py","message":"m","error_type":null,` +
				`"metadata":{"owner":"ads"},"runtime_env":{},"driver_agent_http_address":"http://127.0.0.1:52365",` +
				`"driver_node_id":"n1",` + tt.body + `}`
			srv, _ := scripted(t, answer(200, body))
			d, err := newClient(t, srv.URL).Get(ctx(t), "train-1")
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			type view struct {
				Status         raysubmit.Status
				Terminal       bool
				ExitCode       *int
				Started, Ended time.Time
				Message        string
				Metadata       map[string]string
			}
			want := view{raysubmit.Status(tt.status), tt.terminal, tt.exit, start, tt.ended, "m", map[string]string{"owner": "ads"}}
			got := view{d.Status, d.Status.Terminal(), d.DriverExitCode, d.Started(), d.Ended(), d.Message, d.Metadata}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnknownAndEndedJobs: Ray's 404 for a job it does not know is
// ErrNotFound for every call, and stopping a job that already ended is
// no error.
func TestUnknownAndEndedJobs(t *testing.T) {
	t.Parallel()
	notFound, _ := scripted(t, answer(404, "Job nope does not exist"))
	c := newClient(t, notFound.URL)
	_, getErr := c.Get(ctx(t), "nope")
	_, stopErr := c.Stop(ctx(t), "nope")
	_, logsErr := c.Logs(ctx(t), "nope")
	for name, err := range map[string]error{"Get": getErr, "Stop": stopErr, "Logs": logsErr} {
		if !errors.Is(err, raysubmit.ErrNotFound) {
			t.Errorf("%s of an unknown job = %v, want ErrNotFound", name, err)
		}
	}
	if want := "get job nope: GET /api/jobs/nope: not found"; getErr == nil || getErr.Error() != want {
		t.Errorf("Get error = %v, want %q", getErr, want)
	}
	for _, tt := range []struct {
		body string
		want bool
	}{{`{"stopped": true}`, true}, {`{"stopped": false}`, false}} {
		srv, _ := scripted(t, answer(200, tt.body))
		stopped, err := newClient(t, srv.URL).Stop(ctx(t), "train-1")
		if err != nil || stopped != tt.want {
			t.Errorf("Stop answered %s = %v, %v; want %v, nil", tt.body, stopped, err, tt.want)
		}
	}
}
