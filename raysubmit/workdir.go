package raysubmit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// MaxWorkingDirEntries is the default bound on the files and directories a
// working directory packages (Ray has none; a tree that big is a mistake,
// e.g. a virtualenv or a home directory).
const MaxWorkingDirEntries = 100_000

// WorkingDirError is a working directory that cannot be packaged as it
// is: missing, unreadable, the filesystem root, a dangling symlink, a
// symlink loop or one leading outside it, a bad pattern, or over a limit (wrapping
// ErrPackageTooLarge). It is the user's to fix, not the cluster's.
type WorkingDirError struct {
	// Dir is the working directory.
	Dir string
	// Err says what is wrong and how to fix it.
	Err error
}

// Error names the directory and the problem.
func (e *WorkingDirError) Error() string { return "working dir " + e.Dir + ": " + e.Err.Error() }

// Unwrap returns the problem.
func (e *WorkingDirError) Unwrap() error { return e.Err }

// Stats says what a working directory packages, after excludes.
type Stats struct {
	// Files and Dirs count the entries.
	Files, Dirs int
	// Bytes is the files' total size, uncompressed.
	Bytes int64
}

// CheckWorkingDir walks dir as BuildPackage would, without writing
// anything, so a step can refuse it before creating a cluster. It stops at
// the first problem or as soon as a limit of opts is exceeded; every
// problem with the directory is a *WorkingDirError.
func CheckWorkingDir(ctx context.Context, dir string, opts PackageOptions) (Stats, error) {
	t, err := walkWorkingDir(ctx, dir, opts)
	return t.stats, err
}

// entry is one file or directory to package.
type entry struct {
	name string // slash path in the zip; directories end in "/"
	src  string // path on disk; empty for a directory
	info fs.FileInfo
}

// usage is what one top-level entry adds up to, for the advice on what to exclude.
type usage struct {
	name    string
	bytes   int64
	entries int
}

// tree is a walked working directory.
type tree struct {
	stats   Stats
	entries []entry
}

// walker walks one working directory.
type walker struct {
	ctx        context.Context
	root       string
	realRoot   string // root with its symlinks resolved
	excludes   ignoreRules
	gitignore  bool
	maxBytes   int64
	maxEntries int
	top        map[string]*usage
	tree       tree
}

// walkWorkingDir lists what dir packages, in zip order, and checks it.
func walkWorkingDir(ctx context.Context, dir string, opts PackageOptions) (tree, error) {
	excludes, err := excludeRules(opts.Excludes)
	if err != nil {
		return tree{}, &WorkingDirError{Dir: dir, Err: err}
	}
	w := &walker{
		ctx: ctx, root: dir, excludes: excludes, gitignore: !opts.IgnoreGitignore,
		maxBytes: cmp.Or(opts.MaxSize, MaxPackageSize), maxEntries: cmp.Or(opts.MaxEntries, MaxWorkingDirEntries),
		top: map[string]*usage{},
	}
	err = w.walkRoot()
	var wde *WorkingDirError
	if err != nil && !errors.As(err, &wde) && ctx.Err() == nil {
		err = &WorkingDirError{Dir: dir, Err: err}
	}
	return w.tree, err
}

func (w *walker) walkRoot() error {
	abs, err := filepath.Abs(w.root)
	if err != nil {
		return err
	}
	if filepath.Dir(abs) == abs {
		return errors.New("is the filesystem root: name the directory that holds the job's code")
	}
	info, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("does not exist or cannot be read: %w", err)
	}
	if !info.IsDir() {
		return errors.New("is not a directory")
	}
	if w.realRoot, err = filepath.EvalSymlinks(abs); err != nil {
		return fmt.Errorf("cannot be resolved: %w", err)
	}
	return w.walkDir(abs, "", defaultRules(), []fs.FileInfo{info})
}

// walkDir adds the entries of dir (slash path rel below the root) in name
// order, recursively; ancestors are the directories on the way down, to
// tell a symlink loop.
func (w *walker) walkDir(dir, rel string, rules ignoreRules, ancestors []fs.FileInfo) error {
	rules, err := w.dirRules(dir, rel, rules)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", w.shown(rel), err)
	}
	matcher := append(rules[:len(rules):len(rules)], w.excludes...) // excludes win, like git's command line
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		name := path.Join(rel, e.Name())
		full := filepath.Join(dir, e.Name())
		info, err := os.Stat(full) // follows symlinks, as Ray does
		if err != nil {
			if matcher.ignored(name, false) {
				continue
			}
			return w.statError(name, e, err)
		}
		if matcher.ignored(name, info.IsDir()) {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			if err := w.inside(name, full); err != nil {
				return err
			}
		}
		switch {
		case info.IsDir():
			if slices.ContainsFunc(ancestors, func(a fs.FileInfo) bool { return os.SameFile(a, info) }) {
				return fmt.Errorf("%s is a symlink loop (it leads back to a directory above it): "+
					"remove it or add it to runtimeEnv.excludes", name)
			}
			if err := w.add(entry{name: name + "/", info: info}); err != nil {
				return err
			}
			if err := w.walkDir(full, name, rules, append(ancestors, info)); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := w.addFile(entry{name: name, src: full, info: info}); err != nil {
				return err
			}
		} // sockets, pipes and devices are left out, as Ray does
	}
	return nil
}

// inside fails unless the symlink full (name in the zip) leads to a path
// within the working dir. One that leads out (creds -> ~/.aws, a checkout's
// link to the home directory) would upload what its author never meant to
// ship to a cluster others can read.
func (w *walker) inside(name, full string) error {
	target, err := filepath.EvalSymlinks(full)
	if err != nil {
		return fmt.Errorf("%s is a symlink that cannot be followed (%v): remove it or add it to runtimeEnv.excludes", name, err)
	}
	if rel, err := filepath.Rel(w.realRoot, target); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return nil
	}
	return fmt.Errorf("%s is a symlink to %s, outside the working dir: raystep uploads nothing from outside it; "+
		"copy what the job needs into the working dir, or add %s to runtimeEnv.excludes", name, target, name)
}

// dirRules adds the patterns of dir's .gitignore and .rayignore files.
func (w *walker) dirRules(dir, rel string, rules ignoreRules) (ignoreRules, error) {
	names := []string{".rayignore"}
	if w.gitignore {
		names = []string{".gitignore", ".rayignore"}
	}
	rules = rules[:len(rules):len(rules)]
	for _, name := range names {
		more, err := readIgnoreFile(dir, rel, name)
		if err != nil {
			return nil, err
		}
		rules = append(rules, more...)
	}
	return rules, nil
}

// statError explains an entry that cannot be followed.
func (w *walker) statError(name string, e fs.DirEntry, err error) error {
	if e.Type()&fs.ModeSymlink == 0 {
		return fmt.Errorf("cannot read %s: %w", name, err)
	}
	why := "a dangling symlink (editor lock files are)"
	if !errors.Is(err, fs.ErrNotExist) {
		why = fmt.Sprintf("a symlink that cannot be followed (%v)", errors.Unwrap(err))
	}
	return fmt.Errorf("%s is %s: remove it or add it to runtimeEnv.excludes or a .rayignore file", name, why)
}

// addFile adds a regular file once it is known to be readable.
func (w *walker) addFile(e entry) error {
	f, err := os.Open(e.src)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", e.name, err)
	}
	_ = f.Close() // read-only, nothing to flush
	return w.add(e)
}

// add counts e and records it; over a limit, the error says what to exclude.
func (w *walker) add(e entry) error {
	s := &w.tree.stats
	if e.src == "" {
		s.Dirs++
	} else {
		s.Files++
		s.Bytes += e.info.Size()
	}
	w.tree.entries = append(w.tree.entries, e)
	top, _, _ := strings.Cut(e.name, "/")
	if top != e.name {
		top += "/"
	}
	u := w.top[top]
	if u == nil {
		u = &usage{name: top}
		w.top[top] = u
	}
	u.entries++
	if e.src != "" {
		u.bytes += e.info.Size()
	}
	switch {
	case s.Bytes > w.maxBytes:
		return fmt.Errorf("%w: its files add up to more than %s (stopped counting at %s), Ray takes a package "+
			"under %s: exclude %s with runtimeEnv.excludes, .rayignore or .gitignore",
			ErrPackageTooLarge, mib(w.maxBytes), mib(s.Bytes), mib(w.maxBytes), w.largest(true))
	case s.Files+s.Dirs > w.maxEntries:
		return fmt.Errorf("%w: it holds more than %d files and directories (stopped counting there): "+
			"exclude %s with runtimeEnv.excludes, .rayignore or .gitignore",
			ErrPackageTooLarge, w.maxEntries, w.largest(false))
	}
	return nil
}

// largest names the three biggest top-level entries, by bytes or by count.
func (w *walker) largest(byBytes bool) string {
	all := make([]*usage, 0, len(w.top))
	for _, u := range w.top {
		all = append(all, u)
	}
	slices.SortFunc(all, func(a, b *usage) int {
		if byBytes {
			return cmp.Or(cmp.Compare(b.bytes, a.bytes), cmp.Compare(a.name, b.name))
		}
		return cmp.Or(cmp.Compare(b.entries, a.entries), cmp.Compare(a.name, b.name))
	})
	var parts []string
	for _, u := range all[:min(3, len(all))] {
		if byBytes {
			parts = append(parts, fmt.Sprintf("%s (%s)", u.name, mib(u.bytes)))
		} else {
			parts = append(parts, fmt.Sprintf("%s (%d entries)", u.name, u.entries))
		}
	}
	return "the largest: " + strings.Join(parts, ", ")
}

// shown names rel for a message; "." for the root.
func (w *walker) shown(rel string) string { return cmp.Or(rel, ".") }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
