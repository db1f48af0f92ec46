package notebook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/schemas"
	"github.com/raystep/raystep/test/jupytertest"
	"github.com/raystep/raystep/test/raytest"
)

// The tests run notebooks as jobs on the session's shared heads (test/raytest).
var (
	ray      raytest.Shared
	tokenRay = raytest.Shared{Options: rayhead.Options{TokenAuth: true}}
)

func TestMain(m *testing.M) {
	code := m.Run()
	ray.Stop()
	tokenRay.Stop()
	os.Exit(code)
}

// freePort is a port for a notebook server, as up --notebook chooses it.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := notebook.LoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestLaunchOnRealHead starts the notebook job on a real token-authenticated
// local Ray head, JupyterLab with its token in a file on the head as the
// local backend's up --notebook does, a bare server with its token in the
// job's working_dir package as on KubeRay, and checks the server answers
// with its token and refuses without it, that the token is nowhere in the
// job Ray shows and the packaged one serves the home directory; a second
// Start finds the job running and leaves it be.
func TestLaunchOnRealHead(t *testing.T) {
	head := tokenRay.Head(t)
	for _, app := range []string{schemas.NotebookServer, schemas.NotebookLab} {
		packaged := app == schemas.NotebookServer
		t.Run(app, func(t *testing.T) {
			p := schemas.NotebookProfile{Port: freePort(t), App: app}
			s, err := notebook.NewServer(p)
			if err != nil {
				t.Fatal(err)
			}
			cluster := raytest.Name(t, "nb-"+app)
			ray, err := raysubmit.New(raysubmit.Config{BaseURL: head.DashboardURL(), Token: head.Token()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if j, err := (&notebook.Starter{Ray: ray, Cluster: cluster}).Job(context.Background()); err == nil {
					_, _ = ray.Stop(context.Background(), j.SubmissionID)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if packaged {
				st := &notebook.Starter{Ray: ray, Cluster: cluster}
				if _, err := st.Start(ctx, s); err != nil {
					t.Fatal(err)
				}
				loopback := "http://127.0.0.1:" + itoa(s.Port)
				if err := st.Await(ctx, func(context.Context) (string, error) { return loopback, nil }, s); err != nil {
					t.Fatal(err)
				}
			} else {
				tokenFile := filepath.Join(t.TempDir(), "notebook-token")
				if err := notebook.Launch(ctx, head.DashboardURL(), head.Token(), cluster, p, s, tokenFile); err != nil {
					t.Fatal(err)
				}
			}
			job, err := (&notebook.Starter{Ray: ray, Cluster: cluster}).Job(ctx)
			if err != nil {
				t.Fatal(err)
			}
			shown, _ := json.Marshal(job)
			wants := map[bool]string{false: `"JUPYTER_TOKEN_FILE"`, true: `"working_dir":"gcs://_ray_pkg_`}[packaged]
			if strings.Contains(string(shown), s.Token) || !strings.Contains(string(shown), wants) {
				t.Errorf("the notebook job as the Jobs API shows it carries its token or lacks %s:\n%s", wants, shown)
			}
			if packaged { // the server does not serve the package's directory
				names, err := rootListing(ctx, s)
				if err != nil || slices.Contains(names, "raystep-notebook-token") {
					t.Errorf("the notebook's root holds %v (%v), want the home directory, not the token's", names, err)
				}
			}
			base := s.URL("http://127.0.0.1:" + itoa(s.Port))
			t.Logf("notebook at %s", base)
			hc := &http.Client{Timeout: 10 * time.Second}
			for _, tc := range []struct {
				name, token string
				want        int
			}{
				{"with the token", s.Token, http.StatusOK},
				{"without a token", "", http.StatusForbidden},
				{"with another token", otherToken(s.Token), http.StatusForbidden},
			} {
				got, err := notebook.Status(ctx, hc, "http://127.0.0.1:"+itoa(s.Port), tc.token)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("%s: GET /api/status = %d, want %d", tc.name, got, tc.want)
				}
			}
			st := &notebook.Starter{Ray: ray, Cluster: cluster}
			started, err := st.Start(ctx, s)
			if err != nil || started {
				t.Errorf("Start on a running notebook = %v, %v; want false, nil", started, err)
			}
			activity(t, ctx, hc, "http://127.0.0.1:"+itoa(s.Port), s)
		})
	}
}

// otherToken returns a token of the same length and alphabet that differs
// from tok in its first character.
func otherToken(tok string) string {
	first := "0"
	if tok[0] == '0' {
		first = "1"
	}
	return first + tok[1:]
}

// TestAwaitFailsWhenTheJobEnds: a notebook that cannot start (its port is
// taken) fails the wait with the job's end, not after a timeout.
func TestAwaitFailsWhenTheJobEnds(t *testing.T) {
	head := ray.Head(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := schemas.NotebookProfile{Port: ln.Addr().(*net.TCPAddr).Port, App: schemas.NotebookServer}
	s, err := notebook.NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err = notebook.Launch(ctx, head.DashboardURL(), "", raytest.Name(t, "taken"), p, s, filepath.Join(t.TempDir(), "token"))
	if !errors.Is(err, notebook.ErrJobEnded) {
		t.Fatalf("Launch on a taken port = %v, want ErrJobEnded", err)
	}
	t.Log(err)
}

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.notebook.json")
	if _, err := notebook.ReadFile(path); !errors.Is(err, notebook.ErrNone) {
		t.Fatalf("ReadFile of nothing = %v, want ErrNone", err)
	}
	want := notebook.Server{Port: 8888, App: "lab", Token: "abc"}
	if err := notebook.WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stat = %v, %v; want mode 0600", fi, err)
	}
	got, err := notebook.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ReadFile (-want +got):\n%s", d)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// rootListing returns the names of the files the server at its port on
// the loopback serves at its root (Jupyter's contents API).
func rootListing(ctx context.Context, s notebook.Server) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+itoa(s.Port)+"/api/contents", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "token "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var dir struct {
		Content []struct{ Name string } `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dir); err != nil {
		return nil, fmt.Errorf("GET /api/contents: %s: %w", resp.Status, err)
	}
	var names []string
	for _, c := range dir.Content {
		names = append(names, c.Name)
	}
	return names, nil
}

// activity checks ServerActivity against the real server at base: idle
// with no kernel, busy while a kernel executes code (and asking does not
// count as use), idle again once that kernel was shut down, last used
// then. (TestLocalIdleStop interrupts a kernel instead.)
func activity(t *testing.T, ctx context.Context, hc *http.Client, base string, s notebook.Server) {
	t.Helper()
	idle, err := notebook.ServerActivity(ctx, hc, base, s)
	if err != nil || idle.Busy != "" || idle.Last.IsZero() {
		t.Fatalf("ServerActivity of a fresh server = %+v, %v; want idle, with a last activity", idle, err)
	}
	again, err := notebook.ServerActivity(ctx, hc, base, s)
	if err != nil || !again.Last.Equal(idle.Last) {
		t.Errorf("asking again moved the last activity from %s to %s (%v): asking must not count as use", idle.Last, again.Last, err)
	}
	u, err := url.Parse(s.URL(base))
	if err != nil {
		t.Fatal(err)
	}
	k := jupytertest.StartBusy(t, u)
	busy, err := notebook.ServerActivity(ctx, hc, base, s)
	if err != nil || !strings.Contains(busy.Busy, "notebook kernel ") || !strings.HasSuffix(busy.Busy, " is busy") {
		t.Errorf("ServerActivity while a kernel executes = %+v, %v; want busy", busy, err)
	}
	k.Shutdown(t)
	deadline := time.Now().Add(time.Minute)
	for {
		after, err := notebook.ServerActivity(ctx, hc, base, s)
		if err != nil {
			t.Fatal(err)
		}
		if after.Busy == "" {
			if !after.Last.After(idle.Last) {
				t.Errorf("last activity %s after the kernel ran, want later than %s", after.Last, idle.Last)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still busy a minute after the kernel was shut down: %+v", after)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
