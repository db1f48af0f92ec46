package ui

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/raystep/raystep/fleet"
)

// localRefresh is how often the page reads this machine's records again.
const localRefresh = 5 * time.Second

// Local is this machine's private heads and steps as the page follows
// them: from their records, not from watches.
type Local struct {
	// List returns their records.
	List func() ([]fleet.Record, error)
	// Dirs are where they are recorded: a file that changes in one is read
	// at once.
	Dirs []string
	// Warn tells what could not be read or watched.
	Warn func(string)
}

// Sync puts the local records in store, in place of those it held.
func (l *Local) Sync(store *Store) error {
	rows, err := l.List()
	if err != nil {
		return fmt.Errorf("read the local heads and steps: %w", err)
	}
	records := make([]*Record, len(rows))
	for i, r := range rows {
		records[i] = &Record{Record: r}
	}
	store.SetLocal(records)
	return nil
}

// Follow syncs store again whenever a file in Dirs changes (inotify), and
// every localRefresh anyway (a head that died or expired changes no
// file), until ctx is done.
func (l *Local) Follow(ctx context.Context, store *Store) {
	tick := time.NewTicker(localRefresh)
	defer tick.Stop()
	var changed <-chan fsnotify.Event
	if w, err := l.watch(); err != nil {
		l.Warn("ui: local records are read every " + localRefresh.String() + ": " + err.Error())
	} else {
		defer w.Close()
		changed = w.Events
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
		if err := l.Sync(store); err != nil {
			l.Warn("ui: " + err.Error())
		}
	}
}

// watch watches Dirs (made if missing, so a first step or cluster is seen
// at once).
func (l *Local) watch() (*fsnotify.Watcher, error) {
	if len(l.Dirs) == 0 {
		return nil, fmt.Errorf("no state dir")
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	for _, d := range l.Dirs {
		if err = os.MkdirAll(d, 0o700); err == nil {
			err = w.Add(d)
		}
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
	}
	go func() { // errors (an overflow, say) leave the ticker to catch up
		for range w.Errors {
		}
	}()
	return w, nil
}
