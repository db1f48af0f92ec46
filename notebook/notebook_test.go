package notebook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/schemas"
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

// freePort returns a port of 127.0.0.1 nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestLaunchOnRealHead starts the notebook job on a real token-authenticated
// local Ray head, as the local backend's up --notebook does, and checks the
// server answers with its token (read from its file) and refuses without
// it, that the token is nowhere in the job Ray shows; a second Launch
// finds the job running and leaves it be.
func TestLaunchOnRealHead(t *testing.T) {
	head := tokenRay.Head(t)
	for _, app := range []string{schemas.NotebookServer, schemas.NotebookLab} {
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
			t.Cleanup(func() { _, _ = ray.Stop(context.Background(), notebook.SubmissionID(cluster)) })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			tokenFile := filepath.Join(t.TempDir(), "notebook-token")
			if err := notebook.Launch(ctx, head.DashboardURL(), head.Token(), cluster, p, s, tokenFile); err != nil {
				t.Fatal(err)
			}
			job, err := ray.Get(ctx, notebook.SubmissionID(cluster))
			if err != nil {
				t.Fatal(err)
			}
			shown, _ := json.Marshal(job)
			if strings.Contains(string(shown), s.Token) || !strings.Contains(string(shown), "JUPYTER_TOKEN_FILE") {
				t.Errorf("the notebook job as the Jobs API shows it carries its token or lacks JUPYTER_TOKEN_FILE:\n%s", shown)
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
