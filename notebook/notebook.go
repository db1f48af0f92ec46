// Package notebook starts and reaches the Jupyter server of an interactive
// Ray cluster (`raystep up --notebook`, `raystep notebook NAME`), whatever
// the backend.
//
// The server is a Ray job on the cluster's head, submitted through the
// Jobs API with metadata that names it the cluster's notebook (IsJob),
// under a fresh submission id at each start, that runs JupyterLab or a
// bare Jupyter Server bound to the head's loopback on the profile's port,
// with a random token. Being a job of the head, it lives and dies with
// the cluster: expiry, `raystep down` and `raystep gc` need nothing of
// their own for it. The token reaches the server in a file on the head
// that the job's environment names (JUPYTER_TOKEN_FILE), never on a
// command line nor in the job's runtime_env, which the Jobs API, the state
// API and the dashboard show to whoever reads the cluster's jobs.
// On a head that shares this machine's file system (the local backend)
// raystep writes that file itself (Starter.TokenFile); elsewhere the file
// travels as the job's working_dir package, which Ray keeps in the
// cluster's GCS and unpacks on the head, and the job then starts the
// server in the home directory.
//
// This package owns the job and the wait until the server answers; where
// the token is kept (a Secret, a file) and how 127.0.0.1 reaches the head
// (a port-forward, the loopback itself) are the backends'.
package notebook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/schemas"
)

// Server is what reaching a notebook takes: where it listens on the head,
// which app it is and its token.
type Server struct {
	// Port is the server's port on the head's loopback.
	Port int `json:"port"`
	// App is schemas.NotebookLab or schemas.NotebookServer.
	App string `json:"app"`
	// Token is the server's token.
	Token string `json:"token"`
}

// URL is the address a browser opens, for a server reached at base
// (e.g. http://127.0.0.1:8888), token included.
func (s Server) URL(base string) string {
	path := "/lab"
	if s.App == schemas.NotebookServer {
		path = "/api/status" // a bare server has no page of its own
	}
	return strings.TrimSuffix(base, "/") + path + "?token=" + s.Token
}

// Metadata of a notebook job: raystep.dev/kind is "notebook" and
// raystep.dev/cluster names the cluster.
const (
	MetadataKind    = "raystep.dev/kind"
	MetadataCluster = "raystep.dev/cluster"
	kindNotebook    = "notebook"
)

// IsJob says whether j is a notebook job of cluster.
func IsJob(j raysubmit.JobDetails, cluster string) bool {
	return j.Metadata[MetadataKind] == kindNotebook && j.Metadata[MetadataCluster] == cluster
}

// newSubmissionID returns a submission id for a new notebook job of
// cluster. Each start has one of its own: for a moment after a job ended,
// Ray still watches its supervisor under its id, and would fail a new job
// that reused it when that supervisor exits.
func newSubmissionID(cluster string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "raystep-notebook-" + cluster + "-" + hex.EncodeToString(b[:])
}

// NewServer returns the server the profile describes, with a fresh random
// token of 32 bytes.
func NewServer(p schemas.NotebookProfile) (Server, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Server{}, fmt.Errorf("make a notebook token: %w", err)
	}
	p = p.Resolved()
	return Server{Port: p.Port, App: p.App, Token: hex.EncodeToString(b[:])}, nil
}

// packagedToken is the token's file in the job's working_dir package.
const packagedToken = "raystep-notebook-token"

// entrypoint is the notebook job's shell command. With the token in the
// job's working_dir package (packaged), the job starts in that package's
// directory: the command names the file there, then serves the home
// directory, where the server would have started without a package.
func entrypoint(s Server, packaged bool) string {
	module := "jupyterlab"
	if s.App == schemas.NotebookServer {
		module = "jupyter_server"
	}
	cmd := fmt.Sprintf("python -m %s --no-browser --allow-root --ip=127.0.0.1 --port=%d --port-retries=0", module, s.Port)
	if packaged {
		cmd = `JUPYTER_TOKEN_FILE="$PWD/` + packagedToken + `"; export JUPYTER_TOKEN_FILE; cd; exec ` + cmd
	}
	return cmd
}

// Starter submits the notebook job of one cluster and waits until its
// server answers.
type Starter struct {
	// Ray is the cluster's Jobs API client.
	Ray *raysubmit.Client
	// Cluster names the cluster (the job's submission id).
	Cluster string
	// Pip are the packages the job installs (the profile's).
	Pip []string
	// TokenFile is the file on the head that holds the token alone (see
	// WriteToken); the job's environment names it. Empty: Start uploads
	// the token as the job's working_dir package, for a head on another
	// machine.
	TokenFile string
	// HTTP asks the server; nil means a client with a 5 s timeout.
	HTTP *http.Client
	// PollInterval is how often Await asks; zero means a second.
	PollInterval time.Duration

	// id is the submission id of the notebook job Start submitted or
	// found, or Await found; empty before.
	id string
}

// SubmissionID is the Ray submission id of the notebook job Start
// submitted or found (empty before Start or Await).
func (st *Starter) SubmissionID() string { return st.id }

// ErrJobEnded is wrapped by Await's error when the notebook job ended
// before its server answered (the head lacks Jupyter, the port is taken).
var ErrJobEnded = errors.New("notebook job ended")

// Start submits the notebook job serving s, unless one runs already (up
// on a live cluster), which Start reports as false. Jobs that ended stay
// in Ray's list, as every job does.
func (st *Starter) Start(ctx context.Context, s Server) (bool, error) {
	cur, err := st.Job(ctx)
	switch {
	case errors.Is(err, ErrNoJob):
	case err != nil:
		return false, fmt.Errorf("start the notebook: %w", err)
	case !cur.Status.Terminal():
		return false, nil
	}
	env := map[string]any{}
	if st.TokenFile != "" {
		env["env_vars"] = map[string]string{"JUPYTER_TOKEN_FILE": st.TokenFile}
	} else {
		uri, err := st.uploadToken(ctx, s.Token)
		if err != nil {
			return false, err
		}
		env["working_dir"] = uri
	}
	if len(st.Pip) > 0 {
		env["pip"] = st.Pip
	}
	id := newSubmissionID(st.Cluster)
	_, err = st.Ray.Submit(ctx, raysubmit.SubmitRequest{Entrypoint: entrypoint(s, st.TokenFile == ""), SubmissionID: id, RuntimeEnv: env,
		Metadata: map[string]string{MetadataKind: kindNotebook, MetadataCluster: st.Cluster}})
	if err != nil {
		return false, fmt.Errorf("start the notebook: %w", err)
	}
	st.id = id
	return true, nil
}

// ErrNoJob is Job's error when the cluster has no notebook job.
var ErrNoJob = errors.New("no notebook job")

// Job returns the cluster's notebook job: the one pending or running,
// else the last one submitted; ErrNoJob when there is none.
func (st *Starter) Job(ctx context.Context) (*raysubmit.JobDetails, error) {
	jobs, err := st.Ray.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("find the notebook's job: %w", err)
	}
	var found *raysubmit.JobDetails
	for i := range jobs {
		j := &jobs[i]
		if !IsJob(*j, st.Cluster) {
			continue
		}
		if found == nil || (!j.Status.Terminal() && found.Status.Terminal()) ||
			(j.Status.Terminal() == found.Status.Terminal() && j.StartTime > found.StartTime) {
			found = j
		}
	}
	if found == nil {
		return nil, fmt.Errorf("cluster %s: %w", st.Cluster, ErrNoJob)
	}
	st.id = found.SubmissionID
	return found, nil
}

// Running says whether the cluster's notebook job is pending or running.
func (st *Starter) Running(ctx context.Context) (bool, error) {
	j, err := st.Job(ctx)
	if errors.Is(err, ErrNoJob) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !j.Status.Terminal(), nil
}

// uploadToken uploads a package that holds token alone, in the file
// entrypoint names, and returns its runtime_env URI.
func (st *Starter) uploadToken(ctx context.Context, token string) (string, error) {
	dir, err := os.MkdirTemp("", "raystep-notebook-*")
	if err != nil {
		return "", fmt.Errorf("start the notebook: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := WriteToken(filepath.Join(dir, packagedToken), token); err != nil {
		return "", fmt.Errorf("start the notebook: %w", err)
	}
	uri, err := st.Ray.UploadWorkingDir(ctx, dir, raysubmit.PackageOptions{IgnoreGitignore: true})
	if err != nil {
		return "", fmt.Errorf("start the notebook: upload its token: %w", err)
	}
	return uri, nil
}

// Await waits until the server answers /api/status with its token at the
// address base returns, asking every PollInterval, and fails at once with
// the job's message and the end of its logs when the job ended
// (ErrJobEnded). base is called before each question: a port-forward that
// a refused connection ended (the server not listening yet) opens again.
func (st *Starter) Await(ctx context.Context, base func(context.Context) (string, error), s Server) error {
	hc := st.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	every := st.PollInterval
	if every <= 0 {
		every = time.Second
	}
	if st.id == "" {
		if _, err := st.Job(ctx); err != nil {
			return fmt.Errorf("wait for the notebook: %w", err)
		}
	}
	id := st.id
	for {
		at, err := base(ctx)
		if err != nil {
			return fmt.Errorf("wait for the notebook: %w", err)
		}
		code, err := Status(ctx, hc, at, s.Token)
		if err == nil && code == http.StatusOK {
			return nil
		}
		d, gerr := st.Ray.Get(ctx, id)
		if gerr != nil {
			return fmt.Errorf("wait for the notebook: %w", gerr)
		}
		if d.Status.Terminal() {
			msg := d.Message
			if logs, err := st.Ray.Logs(ctx, id); err == nil && !strings.Contains(msg, "logs") {
				msg += tail(logs) // Ray puts the end of the logs in the message of a failed entrypoint
			}
			return fmt.Errorf("wait for the notebook: %w: job %s %s: %s", ErrJobEnded, id, d.Status, msg)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for the notebook at %s (job %s %s): %w", at, id, d.Status, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Launch starts the notebook job of cluster on the dashboard at
// dashboardURL (with Ray's token rayToken, if any) and waits until it
// answers on the head's loopback, which is this machine's, its token kept
// in tokenFile (WriteToken) for the server to read.
func Launch(ctx context.Context, dashboardURL, rayToken, cluster string, p schemas.NotebookProfile, s Server, tokenFile string) error {
	c, err := raysubmit.New(raysubmit.Config{BaseURL: dashboardURL, Token: rayToken})
	if err != nil {
		return err
	}
	if err := WriteToken(tokenFile, s.Token); err != nil {
		return err
	}
	st := &Starter{Ray: c, Cluster: cluster, Pip: p.Pip, TokenFile: tokenFile}
	if _, err := st.Start(ctx, s); err != nil {
		return err
	}
	loopback := fmt.Sprintf("http://127.0.0.1:%d", s.Port)
	return st.Await(ctx, func(context.Context) (string, error) { return loopback, nil }, s)
}

// Status asks the server at base for /api/status with token (none when
// empty) and returns the HTTP status code.
func Status(ctx context.Context, hc *http.Client, base, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/api/status", nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// tail is the last lines of a job's logs, for an error.
func tail(logs string) string {
	lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "; its log ends:\n  " + strings.Join(lines, "\n  ")
}
