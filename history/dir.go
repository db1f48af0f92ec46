package history

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Dir is the history kept on this machine, under Root.
type Dir struct{ Root string }

// DefaultKeep is how long gc keeps a record unless the profile says
// otherwise.
const DefaultKeep = 30 * 24 * time.Hour

const (
	recordFile  = "record.json"
	runningFile = "running.json" // the record as it stands while the step runs
	logFile     = "driver.log"
)

func (d Dir) path(name, file string) string { return filepath.Join(d.Root, name, file) }

// Put writes rec, replacing any record of its name: to a temporary file,
// then renamed, so a reader never sees half a record. The step's running
// record (Start) is removed.
func (d Dir) Put(rec Record) error {
	if err := d.write(rec, recordFile); err != nil {
		return err
	}
	if err := os.Remove(d.path(rec.Name, runningFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// Start records a step that starts: rec as known so far, with PID the
// process that will Put its record. Should that process die first,
// Reap records the step from it.
func (d Dir) Start(rec Record) error { return d.write(rec, runningFile) }

func (d Dir) write(rec Record, file string) error {
	if err := CheckName(rec.Name); err != nil {
		return err
	}
	data, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	dir := filepath.Join(d.Root, rec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".record-*")
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write history record %s: %w", rec.Name, err)
	}
	if err := os.Rename(tmp.Name(), d.path(rec.Name, file)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write history record %s: %w", rec.Name, err)
	}
	return nil
}

// Reaped is the reason of a step whose process died before it wrote its
// record (SIGKILL, its machine stopped), recorded by gc.
const Reaped = "reaped by gc"

// Reap records, as Reaped, every started step whose process is gone
// (alive says whether a pid still runs raystep) without a record of its
// own: ended when its driver log was last written. It returns what it
// recorded.
func (d Dir) Reap(alive func(pid int) bool, now time.Time) ([]Record, error) {
	names, err := d.names()
	if err != nil {
		return nil, err
	}
	var reaped []Record
	var errs []error
	for _, name := range names {
		if _, err := os.Stat(d.path(name, recordFile)); err == nil {
			continue
		}
		rec, err := readRecord(d.path(name, runningFile))
		if errors.Is(err, fs.ErrNotExist) || err == nil && (rec.PID <= 0 || alive(rec.PID)) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rec.Ended, rec.Reason, rec.ExitCode = now.UTC(), Reaped, -1
		rec.Error = fmt.Sprintf("raystep (pid %d) ended without recording how: killed (SIGKILL), or its machine stopped", rec.PID)
		if info, err := os.Stat(d.path(name, logFile)); err == nil {
			rec.Ended = info.ModTime().UTC()
			rec.Log = LogSummary{Bytes: info.Size(), Kept: info.Size()}
		}
		if err := d.Put(rec); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped = append(reaped, rec)
	}
	return reaped, errors.Join(errs...)
}

// Get reads name's record: fs.ErrNotExist when there is none (the step
// still runs, or never ran here).
func (d Dir) Get(name string) (Record, error) {
	if err := CheckName(name); err != nil {
		return Record{}, err
	}
	return readRecord(d.path(name, recordFile))
}

func readRecord(path string) (Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(data, filepath.Base(filepath.Dir(path)), path)
}

// encodeRecord is rec as a record file holds it.
func encodeRecord(rec Record) ([]byte, error) {
	if rec.Version == 0 {
		rec.Version = 1
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode history record %s: %w", rec.Name, err)
	}
	return append(data, '\n'), nil
}

// decodeRecord reads the record of name from data, read from where: an
// error for one cut short or not raystep's.
func decodeRecord(data []byte, name, where string) (Record, error) {
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return Record{}, fmt.Errorf("history record %s is damaged (%w): raystep gc removes it once it is older than the history's keep", where, err)
	}
	if rec.Version != 1 || CheckName(rec.Name) != nil || rec.Name != name {
		return Record{}, fmt.Errorf("history record %s is not one raystep wrote: raystep gc removes it once it is older than the history's keep", where)
	}
	return rec, nil
}

// List returns the records of steps that ended at or after since, the
// latest first, and an error for each record that cannot be read (they
// are left out; a missing history is no error).
func (d Dir) List(since time.Time) ([]Record, []error) {
	names, err := d.names()
	if err != nil {
		return nil, []error{err}
	}
	var recs []Record
	var errs []error
	for _, name := range names {
		rec, err := readRecord(d.path(name, recordFile))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // running, or a step cut off before it wrote one
		case err != nil:
			errs = append(errs, err)
		case !rec.Ended.Before(since):
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b Record) int { return b.Ended.Compare(a.Ended) })
	return recs, errs
}

// Latest returns the records whose names start with prefix of every step
// the history holds: first the ones still running (Ended zero, from the
// record a running step keeps), the latest started first, then the ended
// ones, the latest ended first. A record that cannot be read is left out.
func (d Dir) Latest(prefix string) ([]Record, error) {
	names, err := d.names()
	if err != nil {
		return nil, err
	}
	recs := make([]Record, 0, len(names))
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		rec, err := readRecord(d.path(name, recordFile))
		if errors.Is(err, fs.ErrNotExist) {
			rec, err = readRecord(d.path(name, runningFile))
		}
		if err == nil {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b Record) int {
		aRuns, bRuns := a.Ended.IsZero(), b.Ended.IsZero()
		switch {
		case aRuns && !bRuns:
			return -1
		case bRuns && !aRuns:
			return 1
		case aRuns:
			return cmp.Or(b.Started.Compare(a.Started), strings.Compare(a.Name, b.Name))
		}
		return cmp.Or(b.Ended.Compare(a.Ended), strings.Compare(a.Name, b.Name))
	})
	return recs, nil
}

// names lists the steps the history holds; none when there is no history.
func (d Dir) names() ([]string, error) {
	entries, err := os.ReadDir(d.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && CheckName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// LogPath is the file of name's driver log.
func (d Dir) LogPath(name string) string { return d.path(name, logFile) }

// OpenLog opens name's driver log: the whole of it as kept, also while the
// step still writes it.
func (d Dir) OpenLog(name string) (*os.File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return os.Open(d.path(name, logFile))
}

// Trim removes the history of steps that ended before cutoff, and of
// damaged records whose directory was last written before it; it returns
// the names removed.
func (d Dir) Trim(cutoff time.Time) ([]string, error) {
	names, err := d.names()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, name := range names {
		rec, rerr := readRecord(d.path(name, recordFile))
		switch {
		case errors.Is(rerr, fs.ErrNotExist):
			continue // a running step's log
		case rerr == nil && !rec.Ended.Before(cutoff):
			continue
		case rerr != nil:
			info, err := os.Stat(d.path(name, recordFile))
			if err != nil || !info.ModTime().Before(cutoff) {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(d.Root, name)); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// LogWriter writes a running step's driver log into the history, bounded:
// the first Head bytes go to the file as they come; past them, the last
// Tail bytes are held, and Close appends a note of what was cut and those
// last bytes. A write error stops the log, never the step: Write always
// reports success, and Err tells what went wrong.
//
// The relay writes line by line; the file gets them in batches: at once
// when nothing was written for flushEvery (a line of a quiet job shows in
// `raystep logs -f` at once), else when flushSize bytes are waiting or
// flushEvery after the first of them, so a burst of 200,000 lines costs a
// few hundred writes, not 200,000.
type LogWriter struct {
	mu         sync.Mutex
	f          *os.File
	head, tail int64
	written    int64 // bytes the driver wrote
	ring       []byte
	start      int    // index of the oldest byte in ring once full
	pending    []byte // head bytes not yet in the file
	flushed    time.Time
	timer      *time.Timer
	err        error
}

// Batching of the log's writes to its file.
const (
	flushEvery = 200 * time.Millisecond
	flushSize  = 64 << 10
)

// DefaultLogCap is the driver log a record keeps: its first and last half.
const DefaultLogCap = 4 << 20

// NewLogWriter starts name's driver log in d, keeping at most max bytes
// (max/2 first and max/2 last).
func (d Dir) NewLogWriter(name string, max int64) (*LogWriter, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(d.Root, name), 0o700); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	f, err := os.OpenFile(d.path(name, logFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &LogWriter{f: f, head: max / 2, tail: max - max/2}, nil
}

// Write keeps p's part within the cap; it never fails.
func (w *LogWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.f == nil {
		return n, nil
	}
	if room := w.head - w.written; room > 0 {
		k := min(int64(len(p)), room)
		w.pending = append(w.pending, p[:k]...)
		p = p[k:]
		switch {
		case len(w.pending) >= flushSize, time.Since(w.flushed) >= flushEvery:
			w.flushLocked()
		case w.timer == nil:
			w.timer = time.AfterFunc(flushEvery, w.flush)
		}
	}
	w.written += int64(n)
	w.keepTail(p)
	return n, nil
}

// flush writes what waits, from the timer.
func (w *LogWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	if w.f != nil {
		w.flushLocked()
	}
}

func (w *LogWriter) flushLocked() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if len(w.pending) > 0 && w.err == nil {
		_, w.err = w.f.Write(w.pending)
	}
	w.pending, w.flushed = w.pending[:0], time.Now()
}

// keepTail holds the last w.tail bytes of what went past the head.
func (w *LogWriter) keepTail(p []byte) {
	if w.tail == 0 || len(p) == 0 {
		return
	}
	if int64(len(p)) >= w.tail {
		w.ring = append(w.ring[:0], p[int64(len(p))-w.tail:]...)
		w.start = 0
		return
	}
	if int64(len(w.ring)+len(p)) <= w.tail {
		w.ring = append(w.ring, p...)
		return
	}
	if int64(len(w.ring)) < w.tail { // fill up, then wrap
		fill := int(w.tail) - len(w.ring)
		w.ring = append(w.ring, p[:fill]...)
		p = p[fill:]
	}
	for len(p) > 0 {
		k := copy(w.ring[w.start:], p)
		p = p[k:]
		w.start = (w.start + k) % len(w.ring)
	}
}

// Close writes what waits, the note of what was cut and the kept tail,
// and closes the file. It returns how much was kept.
func (w *LogWriter) Close() LogSummary {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := min(w.written, w.head)
	if w.f == nil {
		return LogSummary{Bytes: w.written, Kept: kept}
	}
	w.flushLocked()
	if w.err == nil && len(w.ring) > 0 {
		tail := append(slices.Clone(w.ring[w.start:]), w.ring[:w.start]...)
		if cut := w.written - w.head - int64(len(tail)); cut > 0 {
			_, w.err = fmt.Fprintf(w.f, "\n[raystep: %d bytes of the driver's log left out here; the first %d and the last %d are kept]\n",
				cut, w.head, len(tail))
		}
		if w.err == nil {
			_, w.err = w.f.Write(tail)
		}
		kept += int64(len(tail))
	}
	if err := w.f.Close(); w.err == nil {
		w.err = err
	}
	w.f = nil
	return LogSummary{Bytes: w.written, Kept: kept}
}

// Err is the first error writing the log met, if any.
func (w *LogWriter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

var _ io.Writer = (*LogWriter)(nil)
