package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Remote is history kept beside the machines that run steps, for steps
// that run where nothing local outlives them (a Dagster pod of a KubeRay
// step): an S3 bucket (through minio-go, a client of S3 and the stores
// that speak its API) or a directory (a shared volume). It holds the same
// two files per step as a Dir, PREFIX/NAME/record.json and
// PREFIX/NAME/driver.log; a step writes its log and then its record once
// it ended, so a reader that finds a record finds its log.
type Remote struct {
	// URL is where it lives, as the profile names it.
	URL string

	s3     *minio.Client // an s3:// store
	bucket string
	prefix string // "" or "a/b/"
	dir    *Dir   // a file:// store
}

// ParseURL checks a history URL:
//
//	s3://BUCKET[/PREFIX][?region=R&endpoint=URL&use_path_style=true&disable_https=true&profile=P]
//	file:///DIR
//
// S3's credentials come from where AWS's tools look for them (the
// environment, ~/.aws/credentials with AWS_PROFILE or profile, the pod's
// web identity or the instance's role), never from the URL. endpoint
// names an S3-compatible store.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("history url %q: %w", raw, err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("history url %q: credentials do not belong in the URL: S3's come from the environment or the pod's role", u.Redacted())
	}
	q := u.Query()
	switch u.Scheme {
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("history url %q: want s3://BUCKET[/PREFIX]", raw)
		}
		for k := range q {
			switch k {
			case "region", "endpoint", "use_path_style", "disable_https", "profile":
			default:
				return nil, fmt.Errorf("history url %q: query parameter %q: want region, endpoint, use_path_style, disable_https or profile (the prefix is the URL's path)", raw, k)
			}
		}
		for _, k := range []string{"use_path_style", "disable_https"} {
			if v := q.Get(k); v != "" {
				if _, err := strconv.ParseBool(v); err != nil {
					return nil, fmt.Errorf("history url %q: %s=%q: want true or false", raw, k, v)
				}
			}
		}
		if ep := q.Get("endpoint"); ep != "" {
			e, err := url.Parse(ep)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || strings.Trim(e.Path, "/") != "" {
				return nil, fmt.Errorf("history url %q: endpoint %q: want http(s)://HOST[:PORT]", raw, ep)
			}
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" || !path.IsAbs(u.Path) {
			return nil, fmt.Errorf("history url %q: want file:///ABSOLUTE/DIR", raw)
		}
		if len(q) > 0 {
			return nil, fmt.Errorf("history url %q: a file URL takes no query", raw)
		}
	default:
		return nil, fmt.Errorf("history url %q: want s3://BUCKET[/PREFIX] or file:///DIR", raw)
	}
	return u, nil
}

// remoteRetries bounds the retries of one request to the store; the
// caller's context bounds the whole.
const remoteRetries = 3

// OpenRemote opens the history at raw (see ParseURL). Nothing is asked of
// the store yet: a bucket that cannot be reached fails the first read or
// write.
func OpenRemote(_ context.Context, raw string) (*Remote, error) {
	u, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	r := &Remote{URL: raw}
	if u.Scheme == "file" {
		r.dir = &Dir{Root: u.Path}
		return r, nil
	}
	q := u.Query()
	host, secure := "s3.amazonaws.com", true
	if ep := q.Get("endpoint"); ep != "" {
		e, _ := url.Parse(ep)
		host, secure = e.Host, e.Scheme == "https"
	}
	if off, _ := strconv.ParseBool(q.Get("disable_https")); off {
		secure = false
	}
	lookup := minio.BucketLookupAuto
	if on, _ := strconv.ParseBool(q.Get("use_path_style")); on {
		lookup = minio.BucketLookupPath
	}
	region := q.Get("region")
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{Profile: q.Get("profile")},
		&credentials.IAM{Client: &http.Client{Timeout: 5 * time.Second}}, // web identity, ECS, the instance's role
	})
	r.s3, err = minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region, BucketLookup: lookup, MaxRetries: remoteRetries})
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", raw, err)
	}
	r.bucket = u.Host
	if p := strings.Trim(u.Path, "/"); p != "" {
		r.prefix = p + "/"
	}
	return r, nil
}

// Close releases the store (nothing to release today).
func (r *Remote) Close() error { return nil }

func (r *Remote) key(name, file string) string { return r.prefix + name + "/" + file }

// Put writes rec with its driver log, read from logPath (none when it
// does not exist): the log first, the record last.
func (r *Remote) Put(ctx context.Context, rec Record, logPath string) error {
	if err := CheckName(rec.Name); err != nil {
		return err
	}
	if r.dir != nil {
		return r.putDir(rec, logPath)
	}
	if f, err := os.Open(logPath); err == nil {
		info, serr := f.Stat()
		if serr == nil {
			_, serr = r.s3.PutObject(ctx, r.bucket, r.key(rec.Name, logFile), f, info.Size(),
				minio.PutObjectOptions{ContentType: "text/plain; charset=utf-8"})
		}
		f.Close()
		if serr != nil {
			return fmt.Errorf("history %s: driver log of %s: %w", r.URL, rec.Name, serr)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("history: %w", err)
	}
	data, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	if _, err := r.s3.PutObject(ctx, r.bucket, r.key(rec.Name, recordFile), bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("history %s: record of %s: %w", r.URL, rec.Name, err)
	}
	return nil
}

// putDir copies the log into the directory store, then writes the record
// (renamed into place, as a Dir does).
func (r *Remote) putDir(rec Record, logPath string) error {
	if in, err := os.Open(logPath); err == nil {
		defer in.Close()
		if err := os.MkdirAll(path.Join(r.dir.Root, rec.Name), 0o700); err != nil {
			return fmt.Errorf("history %s: %w", r.URL, err)
		}
		out, err := os.CreateTemp(path.Join(r.dir.Root, rec.Name), ".log-*")
		if err != nil {
			return fmt.Errorf("history %s: %w", r.URL, err)
		}
		_, cerr := io.Copy(out, in)
		if err := errors.Join(cerr, out.Close()); err != nil {
			_ = os.Remove(out.Name())
			return fmt.Errorf("history %s: driver log of %s: %w", r.URL, rec.Name, err)
		}
		if err := os.Rename(out.Name(), r.dir.LogPath(rec.Name)); err != nil {
			return fmt.Errorf("history %s: %w", r.URL, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("history: %w", err)
	}
	if err := r.dir.write(rec, recordFile); err != nil {
		return fmt.Errorf("history %s: %w", r.URL, err)
	}
	return nil
}

// Get reads name's record: an error wrapping fs.ErrNotExist when there is
// none.
func (r *Remote) Get(ctx context.Context, name string) (Record, error) {
	if err := CheckName(name); err != nil {
		return Record{}, err
	}
	if r.dir != nil {
		return r.dir.Get(name)
	}
	obj, err := r.s3.GetObject(ctx, r.bucket, r.key(name, recordFile), minio.GetObjectOptions{})
	if err != nil {
		return Record{}, r.wrap(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(io.LimitReader(obj, 1<<20))
	if err != nil {
		return Record{}, r.wrap(err)
	}
	return decodeRecord(data, name, r.URL+"/"+name+"/"+recordFile)
}

// OpenLog opens name's driver log.
func (r *Remote) OpenLog(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if r.dir != nil {
		return r.dir.OpenLog(name)
	}
	obj, err := r.s3.GetObject(ctx, r.bucket, r.key(name, logFile), minio.GetObjectOptions{})
	if err != nil {
		return nil, r.wrap(err)
	}
	if _, err := obj.Stat(); err != nil { // GetObject asks nothing until the first read
		obj.Close()
		return nil, r.wrap(err)
	}
	return obj, nil
}

// wrap makes a missing object fs.ErrNotExist, and names the store.
func (r *Remote) wrap(err error) error {
	if code := minio.ToErrorResponse(err).Code; code == minio.NoSuchKey || code == "NoSuchKey" {
		return fmt.Errorf("history %s: %w", r.URL, fs.ErrNotExist)
	}
	return fmt.Errorf("history %s: %w", r.URL, err)
}

// stamps lists the records the store holds, with what changes when one
// is rewritten.
func (r *Remote) stamps(ctx context.Context) (map[string]stamp, error) {
	if r.dir != nil {
		return r.dir.stamps(ctx)
	}
	out := map[string]stamp{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range r.s3.ListObjects(ctx, r.bucket, minio.ListObjectsOptions{Prefix: r.prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, r.wrap(obj.Err)
		}
		name, file, ok := strings.Cut(strings.TrimPrefix(obj.Key, r.prefix), "/")
		if ok && file == recordFile && CheckName(name) == nil {
			out[name] = stamp{mod: obj.LastModified, size: obj.Size}
		}
	}
	return out, nil
}

func (r *Remote) read(ctx context.Context, name string) (Record, error) { return r.Get(ctx, name) }

func (r *Remote) where() string { return r.URL }

// Trim removes the history of steps that ended before cutoff, and damaged
// records written before it; it returns the names removed.
func (r *Remote) Trim(ctx context.Context, cutoff time.Time) ([]string, error) {
	if r.dir != nil {
		return r.dir.Trim(cutoff)
	}
	stamps, err := r.stamps(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for name, st := range stamps {
		rec, err := r.Get(ctx, name)
		if err == nil && !rec.Ended.Before(cutoff) || err != nil && !st.mod.Before(cutoff) {
			continue
		}
		derr := r.s3.RemoveObject(ctx, r.bucket, r.key(name, logFile), minio.RemoveObjectOptions{})
		if derr == nil {
			derr = r.s3.RemoveObject(ctx, r.bucket, r.key(name, recordFile), minio.RemoveObjectOptions{})
		}
		if derr != nil {
			errs = append(errs, r.wrap(derr))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
