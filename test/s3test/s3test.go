// Package s3test starts an S3-compatible server for tests of the history
// store: moto's standalone server (from PyPI, installed in .venv by `make
// venv`), a process of its own speaking the S3 HTTP API on a free port of
// 127.0.0.1, stopped when the test ends.
package s3test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one running S3-compatible server.
type Server struct {
	// Endpoint is its base URL, http://127.0.0.1:PORT.
	Endpoint string
	// creating serializes CreateBucket: moto checks a new bucket's name
	// against every bucket while another request may be adding one, and
	// two creations at once can fail with a 500 (seen under load).
	creating sync.Mutex
	// out is the end of the server's output, for a failure's message.
	out *tail
}

// tail keeps the last 8 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, line...)
	t.buf = append(t.buf, '\n')
	if n := len(t.buf) - 8192; n > 0 {
		t.buf = append(t.buf[:0], t.buf[n:]...)
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Env is the environment a client of the server needs: credentials (the
// server takes any) and no AWS profile or metadata service to look for.
func Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=raystep-test", "AWS_SECRET_ACCESS_KEY=raystep-test",
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}
}

// URL is the history URL of bucket/prefix on the server.
func (s *Server) URL(bucket, prefix string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "use_path_style": {"true"}, "region": {"us-east-1"}, "disable_https": {"true"}}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

// CreateBucket makes bucket on the server.
func (s *Server) CreateBucket(t testing.TB, bucket string) {
	t.Helper()
	s.creating.Lock()
	defer s.creating.Unlock()
	req, err := http.NewRequest(http.MethodPut, s.Endpoint+"/"+bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create bucket %s: %s\n%s\nthe server's output ends:\n%s", bucket, resp.Status, body, s.out)
	}
}

// Keys lists the keys of bucket (up to the first 1000).
func (s *Server) Keys(t testing.TB, bucket string) []string {
	t.Helper()
	resp, err := http.Get(s.Endpoint + "/" + bucket + "?list-type=2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var keys []string
	for _, m := range regexp.MustCompile(`<Key>([^<]*)</Key>`).FindAllStringSubmatch(string(body), -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// Start starts a server and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := serverBin(t)
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	found := make(chan string, 1)
	seen := &tail{}
	go func() {
		defer close(done)
		re := regexp.MustCompile(`Running on (http://127\.0\.0\.1:\d+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			} else {
				seen.add(sc.Text())
			}
		}
		_ = cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hung start, not a wait
	defer cancel()
	select {
	case ep := <-found:
		return &Server{Endpoint: ep, out: seen}
	case <-done:
		t.Fatalf("%s exited before serving:\n%s", bin, seen.String())
	case <-ctx.Done():
		t.Fatalf("%s did not serve within 2 minutes", bin)
	}
	return nil
}

// serverBin is .venv/bin/moto_server of the module, else moto_server on
// PATH.
func serverBin(t testing.TB) string {
	t.Helper()
	if dir, err := os.Getwd(); err == nil {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				if cand := filepath.Join(dir, ".venv", "bin", "moto_server"); fileExists(cand) {
					return cand
				}
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatal(fmt.Errorf("moto_server (moto[server], installed by make venv) not found: %w", err))
	}
	return bin
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Profile writes the platform profile base (a path) with a spec.history
// section of lines (e.g. `url: "s3://..."`, `keep: 72h`) appended, into
// the test's temp dir, and returns its path. base must end inside its
// spec, as examples/platform.yaml does.
func Profile(t testing.TB, base string, lines ...string) string {
	t.Helper()
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, "  history:\n"...)
	for _, l := range lines {
		data = append(data, "    "+l+"\n"...)
	}
	p := filepath.Join(t.TempDir(), "platform.yaml")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
