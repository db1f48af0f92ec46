package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// stamp is what changes when a record is rewritten: enough to tell that
// a record read before is still the one stored.
type stamp struct {
	mod  time.Time
	size int64
}

// source is one place records are kept: this machine's Dir or a Remote.
type source interface {
	stamps(ctx context.Context) (map[string]stamp, error)
	read(ctx context.Context, name string) (Record, error)
	where() string
}

// Index reads the history of this machine and of the profile's store as
// one, latest first; a step in both is the local one. It keeps what it
// read: a record is immutable once written, so listing again reads only
// the records written (or rewritten) since, which is what lets `raystep
// ui` list ten thousand steps on every refresh.
type Index struct {
	sources []source
	local   *Dir
	remote  *Remote

	mu    sync.Mutex
	cache map[string]cached // by where + "\x00" + name
}

type cached struct {
	st   stamp
	rec  Record
	json []byte
	err  error
}

// NewIndex reads local (nil: none) and remote (nil: none).
func NewIndex(local *Dir, remote *Remote) *Index {
	x := &Index{local: local, remote: remote, cache: map[string]cached{}}
	if local != nil {
		x.sources = append(x.sources, local)
	}
	if remote != nil {
		x.sources = append(x.sources, remote)
	}
	return x
}

// readers bounds the records read at once from a store: enough to hide
// an object store's latency, few enough not to be throttled.
const readers = 16

// Entry is a listed record with its JSON (compact, as /api/history
// serves it), encoded once when the record was read.
type Entry struct {
	Record Record
	JSON   []byte
}

// List returns the records of steps that ended at or after since, the
// latest first, and an error for each record or store that cannot be
// read (what can be read is still returned).
func (x *Index) List(ctx context.Context, since time.Time) ([]Record, []error) {
	entries, errs := x.Entries(ctx, since)
	recs := make([]Record, len(entries))
	for i, e := range entries {
		recs[i] = e.Record
	}
	return recs, errs
}

// Entries is List with each record's JSON.
func (x *Index) Entries(ctx context.Context, since time.Time) ([]Entry, []error) {
	seen := map[string]bool{}
	var out []Entry
	var errs []error
	for _, src := range x.sources {
		stamps, err := src.stamps(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got := x.readAll(ctx, src, stamps)
		for name := range stamps {
			c := got[name]
			switch {
			case seen[name]:
			case c.err != nil:
				errs = append(errs, c.err)
			case !c.rec.Ended.Before(since):
				out = append(out, Entry{Record: c.rec, JSON: c.json})
			}
			seen[name] = true
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := b.Record.Ended.Compare(a.Record.Ended); c != 0 {
			return c
		}
		return strings.Compare(a.Record.Name, b.Record.Name)
	})
	return out, errs
}

// readAll returns every record of stamps, reading only those not cached
// with the same stamp, readers at a time; it forgets the records src no
// longer holds.
func (x *Index) readAll(ctx context.Context, src source, stamps map[string]stamp) map[string]cached {
	prefix := src.where() + "\x00"
	out := make(map[string]cached, len(stamps))
	var todo []string
	x.mu.Lock()
	for name, st := range stamps {
		if c, ok := x.cache[prefix+name]; ok && c.st == st {
			out[name] = c
		} else {
			todo = append(todo, name)
		}
	}
	x.mu.Unlock()

	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan string)
	for range min(readers, len(todo)) {
		wg.Go(func() {
			for name := range next {
				rec, err := src.read(ctx, name)
				var data []byte
				if err == nil {
					data, err = json.Marshal(rec)
				}
				mu.Lock()
				out[name] = cached{st: stamps[name], rec: rec, json: data, err: err}
				mu.Unlock()
			}
		})
	}
	for _, name := range todo {
		next <- name
	}
	close(next)
	wg.Wait()

	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.cache {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			if _, still := stamps[name]; !still {
				delete(x.cache, k)
			}
		}
	}
	for name, c := range out {
		if errors.Is(c.err, fs.ErrNotExist) || ctx.Err() != nil {
			continue // gone meanwhile, or not read at all
		}
		x.cache[prefix+name] = c
	}
	return out
}

// Get reads name's record, from this machine first: an error wrapping
// fs.ErrNotExist when no place has one.
func (x *Index) Get(ctx context.Context, name string) (Record, error) {
	if err := CheckName(name); err != nil {
		return Record{}, err
	}
	var errs []error
	for _, src := range x.sources {
		rec, err := src.read(ctx, name)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Record{}, errors.Join(errs...)
	}
	return Record{}, fmt.Errorf("history: no step %s: %w", name, fs.ErrNotExist)
}

// OpenLog opens name's driver log, from this machine first (where a
// running step's log is).
func (x *Index) OpenLog(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if x.local != nil {
		f, err := x.local.OpenLog(name)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if x.remote != nil {
		return x.remote.OpenLog(ctx, name)
	}
	return nil, fmt.Errorf("history: no log of %s: %w", name, fs.ErrNotExist)
}

// stamps lists the records d holds.
func (d *Dir) stamps(context.Context) (map[string]stamp, error) {
	names, err := d.names()
	if err != nil {
		return nil, err
	}
	out := make(map[string]stamp, len(names))
	for _, name := range names {
		info, err := os.Stat(d.path(name, recordFile))
		if err == nil {
			out[name] = stamp{mod: info.ModTime(), size: info.Size()}
		}
	}
	return out, nil
}

func (d *Dir) read(_ context.Context, name string) (Record, error) { return d.Get(name) }

func (d *Dir) where() string { return d.Root }
