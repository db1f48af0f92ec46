package history

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// Remote is history kept in object storage, for steps that run where
// nothing local outlives them (a Dagster pod of a KubeRay step): one
// object per file, PREFIX/NAME/record.json and PREFIX/NAME/driver.log.
// A step writes its log and then its record once it ended, so a reader
// that finds a record finds its log.
type Remote struct {
	// URL is where it lives, as the profile names it.
	URL string
	b   *blob.Bucket
}

// ParseURL checks a history URL and returns the one gocloud.dev opens:
//
//	s3://BUCKET[/PREFIX][?region=R&endpoint=URL&use_path_style=true&disable_https=true]
//	file:///DIR
//
// S3's credentials come from where AWS's tools look for them (the
// environment, ~/.aws, the pod's web identity or instance role), never
// from the URL. An S3-compatible store is reached with endpoint.
func ParseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("history url %q: %w", raw, err)
	}
	if u.User != nil {
		return "", fmt.Errorf("history url %q: credentials do not belong in the URL: S3's come from the environment or the pod's role", u.Redacted())
	}
	q := u.Query()
	switch u.Scheme {
	case "s3":
		if u.Host == "" {
			return "", fmt.Errorf("history url %q: want s3://BUCKET[/PREFIX]", raw)
		}
		for k := range q {
			switch k {
			case "region", "endpoint", "use_path_style", "disable_https", "hostname_immutable", "profile", "dualstack", "fips":
			default:
				return "", fmt.Errorf("history url %q: query parameter %q: want region, endpoint, use_path_style, disable_https, hostname_immutable, profile, dualstack or fips (the prefix is the URL's path)", raw, k)
			}
		}
		if p := strings.Trim(u.Path, "/"); p != "" {
			q.Set("prefix", p+"/")
		}
		u.Path, u.RawQuery = "", q.Encode()
	case "file":
		if u.Host != "" && u.Host != "localhost" || !path.IsAbs(u.Path) {
			return "", fmt.Errorf("history url %q: want file:///ABSOLUTE/DIR", raw)
		}
		if len(q) > 0 {
			return "", fmt.Errorf("history url %q: a file URL takes no query", raw)
		}
		q.Set("create_dir", "true")
		q.Set("metadata", "skip")
		u.RawQuery = q.Encode()
	default:
		return "", fmt.Errorf("history url %q: want s3://BUCKET[/PREFIX] or file:///DIR", raw)
	}
	return u.String(), nil
}

// opener returns a mux that opens the two kinds of bucket ParseURL
// allows, and no other: Google Cloud Storage's own client is left out (its
// package init alone costs every raystep command several milliseconds of
// CPU). A new one each time: s3blob's URLOpener keeps the options of the
// last bucket it opened in itself, so one shared by two opens races.
func opener() *blob.URLMux {
	m := new(blob.URLMux)
	m.RegisterBucket(s3blob.Scheme, new(s3blob.URLOpener))
	m.RegisterBucket(fileblob.Scheme, &fileblob.URLOpener{})
	return m
}

// OpenRemote opens the history at raw (see ParseURL). Nothing is asked of
// the store yet: a bucket that cannot be reached fails the first read or
// write.
func OpenRemote(ctx context.Context, raw string) (*Remote, error) {
	u, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	b, err := opener().OpenBucket(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", raw, err)
	}
	return &Remote{URL: raw, b: b}, nil
}

// Close releases the bucket.
func (r *Remote) Close() error { return r.b.Close() }

func key(name, file string) string { return name + "/" + file }

// Put writes rec with its driver log, read from logPath (none when it
// does not exist): the log first, the record last.
func (r *Remote) Put(ctx context.Context, rec Record, logPath string) error {
	if err := CheckName(rec.Name); err != nil {
		return err
	}
	if f, err := os.Open(logPath); err == nil {
		err = r.b.Upload(ctx, key(rec.Name, logFile), f, &blob.WriterOptions{ContentType: "text/plain; charset=utf-8"})
		f.Close()
		if err != nil {
			return fmt.Errorf("history %s: driver log of %s: %w", r.URL, rec.Name, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("history: %w", err)
	}
	data, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	if err := r.b.WriteAll(ctx, key(rec.Name, recordFile), data, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("history %s: record of %s: %w", r.URL, rec.Name, err)
	}
	return nil
}

// Get reads name's record: an error wrapping os.ErrNotExist when there is
// none.
func (r *Remote) Get(ctx context.Context, name string) (Record, error) {
	if err := CheckName(name); err != nil {
		return Record{}, err
	}
	data, err := r.b.ReadAll(ctx, key(name, recordFile))
	if err != nil {
		return Record{}, r.wrap(err)
	}
	return decodeRecord(data, name, r.URL+"/"+key(name, recordFile))
}

// OpenLog opens name's driver log.
func (r *Remote) OpenLog(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	rd, err := r.b.NewReader(ctx, key(name, logFile), nil)
	if err != nil {
		return nil, r.wrap(err)
	}
	return rd, nil
}

// wrap makes a missing object os.ErrNotExist, and names the store.
func (r *Remote) wrap(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("history %s: %w", r.URL, os.ErrNotExist)
	}
	return fmt.Errorf("history %s: %w", r.URL, err)
}

// stamps lists the records the store holds, with what changes when one
// is rewritten.
func (r *Remote) stamps(ctx context.Context) (map[string]stamp, error) {
	out := map[string]stamp{}
	it := r.b.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, r.wrap(err)
		}
		name, file, ok := strings.Cut(obj.Key, "/")
		if ok && file == recordFile && CheckName(name) == nil {
			out[name] = stamp{mod: obj.ModTime, size: obj.Size}
		}
	}
}

func (r *Remote) read(ctx context.Context, name string) (Record, error) { return r.Get(ctx, name) }

func (r *Remote) where() string { return r.URL }

// Trim removes the history of steps that ended before cutoff, and damaged
// records written before it; it returns the names removed.
func (r *Remote) Trim(ctx context.Context, cutoff time.Time) ([]string, error) {
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
		derr := r.b.Delete(ctx, key(name, logFile))
		if gcerrors.Code(derr) == gcerrors.NotFound {
			derr = nil
		}
		if derr == nil {
			derr = r.b.Delete(ctx, key(name, recordFile))
		}
		if derr != nil {
			errs = append(errs, r.wrap(derr))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
