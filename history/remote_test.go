package history

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/raystep/raystep/test/s3test"
)

var (
	s3once sync.Once
	s3srv  *s3test.Server
)

// s3 is one S3-compatible server (moto, a process of its own) shared by
// this package's tests, each of which uses a bucket of its own. It lives
// as long as the test binary: the first test to need it starts it.
func s3(t *testing.T) *s3test.Server {
	t.Helper()
	s3once.Do(func() {
		for _, kv := range s3test.Env() {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
		s3srv = s3test.Start(&keepAlive{T: t})
	})
	if s3srv == nil {
		t.Fatal("the S3 server did not start (see the first test that needed it)")
	}
	return s3srv
}

// keepAlive is a testing.TB whose cleanups never run: the shared server
// outlives the test that started it, and dies with the test binary
// (Pdeathsig) or in TestMain.
type keepAlive struct{ *testing.T }

func (k *keepAlive) Cleanup(f func()) { cleanups = append(cleanups, f) }

var cleanups []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

func bucket(t *testing.T, srv *s3test.Server) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	srv.CreateBucket(t, name)
	return name
}

// TestRemoteRoundTrip: a record and its log written to the real
// S3-compatible server are read back by another Remote (as another
// process would), listed, and trimmed once old.
func TestRemoteRoundTrip(t *testing.T) {
	t.Parallel()
	srv := s3(t)
	url := srv.URL(bucket(t, srv), "team-a/history")
	ctx := context.Background()
	w, err := OpenRemote(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	logPath := filepath.Join(t.TempDir(), "driver.log")
	log := bytes.Repeat([]byte("epoch 1 loss 0.42\n"), 1000)
	if err := os.WriteFile(logPath, log, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if err := w.Put(ctx, record("raystep-old-1", now.Add(-40*24*time.Hour)), logPath); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, record("raystep-new-2", now), logPath); err != nil {
		t.Fatal(err)
	}
	keys := srv.Keys(t, strings.Split(strings.TrimPrefix(url, "s3://"), "/")[0])
	if len(keys) != 4 || !strings.HasPrefix(keys[0], "team-a/history/raystep-") {
		t.Errorf("bucket holds %q, want 4 objects under team-a/history/", keys)
	}

	r, err := OpenRemote(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	x := NewIndex(nil, r)
	recs, errs := x.List(ctx, time.Time{})
	if len(errs) != 0 || len(recs) != 2 || recs[0].Name != "raystep-new-2" {
		t.Fatalf("List = %v, %v; want new then old", names(recs), errs)
	}
	rc, err := x.OpenLog(ctx, "raystep-new-2")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, log) {
		t.Errorf("log read back: %d bytes, wrote %d", len(got), len(log))
	}
	if _, err := x.Get(ctx, "raystep-none-3"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a step never recorded: %v, want fs.ErrNotExist", err)
	}

	removed, err := r.Trim(ctx, now.Add(-DefaultKeep))
	if err != nil || len(removed) != 1 || removed[0] != "raystep-old-1" {
		t.Fatalf("Trim = %v, %v; want raystep-old-1", removed, err)
	}
	if recs, _ := x.List(ctx, time.Time{}); len(recs) != 1 || recs[0].Name != "raystep-new-2" {
		t.Errorf("after Trim, List = %v", names(recs))
	}
	if _, err := x.OpenLog(ctx, "raystep-old-1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the trimmed step's log: %v, want fs.ErrNotExist", err)
	}
}

// TestRemoteDamagedRecord: a record cut in half in the store is reported
// with where it is, the others still listed.
func TestRemoteDamagedRecord(t *testing.T) {
	t.Parallel()
	srv := s3(t)
	b := bucket(t, srv)
	ctx := context.Background()
	r, err := OpenRemote(ctx, srv.URL(b, "h"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Put(ctx, record("raystep-whole-1", time.Now()), "/nonexistent"); err != nil {
		t.Fatal(err)
	}
	data, _ := encodeRecord(record("raystep-cut-2", time.Now()))
	half := data[:len(data)/2]
	if _, err := r.s3.PutObject(ctx, r.bucket, r.key("raystep-cut-2", recordFile), bytes.NewReader(half), int64(len(half)),
		minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	recs, errs := NewIndex(nil, r).List(ctx, time.Time{})
	if len(recs) != 1 || recs[0].Name != "raystep-whole-1" || len(errs) != 1 || !strings.Contains(errs[0].Error(), "raystep-cut-2/record.json is damaged") {
		t.Fatalf("List = %v, %v; want the whole one and an error naming the cut one", names(recs), errs)
	}
}

// TestRemoteUnreachable: a store nobody answers at fails the write within
// its deadline with an error naming the store.
func TestRemoteUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	url := "s3://nowhere/h?endpoint=http://" + addr + "&use_path_style=true&region=us-east-1&disable_https=true"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := OpenRemote(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.Put(ctx, record("raystep-lost-1", time.Now()), "/nonexistent")
	if err == nil || !strings.Contains(err.Error(), "s3://nowhere/h") {
		t.Fatalf("Put to an unreachable store = %v, want an error naming it", err)
	}
}

// TestIndexRereadsOnlyWhatChanged: a second listing reads no record again
// unless it was rewritten; a record removed is no longer listed.
func TestIndexRereadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	d := &Dir{Root: t.TempDir()}
	now := time.Now().UTC()
	for _, n := range []string{"raystep-a-1", "raystep-b-2"} {
		if err := d.Put(record(n, now)); err != nil {
			t.Fatal(err)
		}
	}
	x := NewIndex(d, nil)
	if recs, _ := x.List(context.Background(), time.Time{}); len(recs) != 2 {
		t.Fatalf("List = %v", names(recs))
	}
	// Damage a's file behind the index's back, keeping its size and time:
	// a cached record is served, so the damage is not seen.
	p := filepath.Join(d.Root, "raystep-a-1", recordFile)
	info, _ := os.Stat(p)
	if err := os.WriteFile(p, bytes.Repeat([]byte{' '}, int(info.Size())), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, info.ModTime(), info.ModTime())
	if recs, errs := x.List(context.Background(), time.Time{}); len(recs) != 2 || len(errs) != 0 {
		t.Fatalf("second List = %v, %v: want both from the cache", names(recs), errs)
	}
	// Rewritten (a new time): read again, and now it is damaged.
	later := info.ModTime().Add(time.Second)
	os.Chtimes(p, later, later)
	if recs, errs := x.List(context.Background(), time.Time{}); len(recs) != 1 || len(errs) != 1 {
		t.Fatalf("List after a rewrite = %v, %v: want b and an error for a", names(recs), errs)
	}
	os.RemoveAll(filepath.Join(d.Root, "raystep-b-2"))
	if recs, _ := x.List(context.Background(), time.Time{}); len(recs) != 0 {
		t.Fatalf("List after b was removed = %v", names(recs))
	}
}

// TestParseURL: the forms a profile may name, and the mistakes it may
// make, each refused with what was expected.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"s3://bkt/team/a", "s3://bkt", "s3://bkt/p?region=eu-west-1&use_path_style=true",
		"s3://bkt/p?endpoint=http://127.0.0.1:9000&disable_https=true", "file:///var/lib/raystep/history"} {
		if _, err := ParseURL(raw); err != nil {
			t.Errorf("ParseURL(%q) = %v, want it accepted", raw, err)
		}
	}
	for raw, want := range map[string]string{
		"gs://bkt/p":                        "want s3://BUCKET[/PREFIX] or file:///DIR",
		"s3:///p":                           "want s3://BUCKET",
		"s3://key:secret@bkt/p":             "credentials do not belong in the URL",
		"s3://bkt/p?access_key=x":           `query parameter "access_key"`,
		"s3://bkt/p?use_path_style=maybe":   "want true or false",
		"s3://bkt/p?endpoint=minio:9000":    "want http(s)://HOST[:PORT]",
		"s3://bkt/p?endpoint=http://u:pw@h": "want http(s)://HOST[:PORT]",
		"file://host/dir":                   "want file:///ABSOLUTE/DIR",
		"file:///d?create_dir=false":        "takes no query",
		"http://bkt.example.com/hist":       "want s3://",
	} {
		_, err := ParseURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q) = %v, want an error saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q)'s error shows the secret: %v", raw, err)
		}
	}
}
