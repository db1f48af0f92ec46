package raysubmit_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/raysubmit"
)

// layout builds a directory: "name" -> body makes a file, "name@" -> target
// a symlink, "name/" a directory, "name#" -> size a sparse file.
func layout(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, strings.TrimRight(name, "@/#"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "@"):
			err = os.Symlink(body, p)
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasSuffix(name, "#"):
			err = sparseFile(p, body)
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sparseFile makes a file of size bytes (e.g. "600Mi") that takes no disk.
func sparseFile(path, size string) error {
	units := map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
	var n int64
	for _, c := range size[:len(size)-2] {
		n = n*10 + int64(c-'0')
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(n * units[size[len(size)-2:]]); err != nil {
		return err
	}
	return f.Close()
}

// TestCheckWorkingDir checks each problem a working dir can have before a
// cluster exists: the error's text, and that it is a *WorkingDirError.
func TestCheckWorkingDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string]string
		dir     string // instead of the layout
		opts    raysubmit.PackageOptions
		want    raysubmit.Stats
		wantErr string // substring; empty for none
		tooBig  bool
	}{
		{
			name:  "fine",
			files: map[string]string{"main.py": "print(1)\n", "pkg/mod.py": "X = 1\n", ".git/HEAD": "ref\n"},
			want:  raysubmit.Stats{Files: 2, Dirs: 1, Bytes: 15},
		},
		{name: "root", dir: "/", wantErr: "working dir /: is the filesystem root"},
		{name: "missing", dir: "/nonexistent/raystep", wantErr: "does not exist"},
		{
			name:    "dangling symlink",
			files:   map[string]string{"main.py": "", "src/.#main.py@": "user@host.1234:1700000000"},
			wantErr: "src/.#main.py is a dangling symlink (editor lock files are): remove it or add it to runtimeEnv.excludes",
		},
		{
			name:  "dangling symlink excluded",
			files: map[string]string{"main.py": "", "src/.#main.py@": "user@host.1234:1700000000"},
			opts:  raysubmit.PackageOptions{Excludes: []string{".#*"}},
			want:  raysubmit.Stats{Files: 1, Dirs: 1},
		},
		{
			name:  "dangling symlink in .rayignore",
			files: map[string]string{"main.py": "", ".rayignore": ".#*\n", "src/.#main.py@": "nowhere"},
			want:  raysubmit.Stats{Files: 2, Dirs: 1, Bytes: 4},
		},
		{
			name:    "symlink loop",
			files:   map[string]string{"a@": "b", "b@": "a"},
			wantErr: "a is a symlink that cannot be followed (too many levels of symbolic links)",
		},
		{
			name:    "symlink to an ancestor",
			files:   map[string]string{"src/main.py": "", "src/up@": ".."},
			wantErr: "src/up is a symlink loop (it leads back to a directory above it)",
		},
		{
			name:  "symlinked directory followed, as Ray does",
			files: map[string]string{"data/x.csv": "1,2\n", "link@": "data"},
			want:  raysubmit.Stats{Files: 2, Dirs: 2, Bytes: 8},
		},
		{
			name:    "symlink out of the working dir",
			files:   map[string]string{"main.py": "", "creds@": "/etc"},
			wantErr: "creds is a symlink to /etc, outside the working dir: raystep uploads nothing from outside it",
		},
		{
			name:    "symlinked file out of the working dir, deeper",
			files:   map[string]string{"main.py": "", "conf/users@": "../../../../../../../../etc/passwd"},
			wantErr: "conf/users is a symlink to /etc/passwd, outside the working dir",
		},
		{
			name:  "symlink out of the working dir, excluded",
			files: map[string]string{"main.py": "", "creds@": "/etc"},
			opts:  raysubmit.PackageOptions{Excludes: []string{"/creds"}},
			want:  raysubmit.Stats{Files: 1},
		},
		{
			name:    "over the size limit",
			files:   map[string]string{"main.py": "", "data/big.bin#": "600Mi", "venv/lib.so#": "10Mi"},
			wantErr: "package too large for Ray: its files add up to more than 512.0 MiB (stopped counting at 600.0 MiB), Ray takes a package under 512.0 MiB: exclude the largest: data/ (600.0 MiB) with runtimeEnv.excludes",
			tooBig:  true,
		},
		{
			name:  "over the size limit, excluded",
			files: map[string]string{"main.py": "", "data/big.bin#": "600Mi"},
			opts:  raysubmit.PackageOptions{Excludes: []string{"/data/"}},
			want:  raysubmit.Stats{Files: 1},
		},
		{
			name:    "too many entries",
			files:   map[string]string{"a": "", "b/1": "", "b/2": "", "b/3": ""},
			opts:    raysubmit.PackageOptions{MaxEntries: 3},
			wantErr: "package too large for Ray: it holds more than 3 files and directories (stopped counting there): exclude the largest: b/ (3 entries), a (1 entries)",
			tooBig:  true,
		},
		{
			name:    "invalid exclude",
			files:   map[string]string{"main.py": ""},
			opts:    raysubmit.PackageOptions{Excludes: []string{"*.log", "data[0-9"}},
			wantErr: `excludes[1] "data[0-9": not a valid gitignore pattern`,
		},
		{
			name:    "invalid .gitignore line",
			files:   map[string]string{"main.py": "", "sub/.gitignore": "# ok\n*.tmp\nfoo\\\n"},
			wantErr: `sub/.gitignore:3: pattern "foo\\": not a valid gitignore pattern`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := tt.dir
			if dir == "" {
				dir = layout(t, tt.files)
			}
			got, err := raysubmit.CheckWorkingDir(t.Context(), dir, tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckWorkingDir: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("stats (-want +got):\n%s", diff)
				}
				return
			}
			var wde *raysubmit.WorkingDirError
			if !errors.As(err, &wde) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckWorkingDir = %v\nwant a *WorkingDirError containing %q", err, tt.wantErr)
			}
			if errors.Is(err, raysubmit.ErrPackageTooLarge) != tt.tooBig {
				t.Errorf("errors.Is(ErrPackageTooLarge) = %v, want %v", !tt.tooBig, tt.tooBig)
			}
		})
	}
}

// TestCheckWorkingDirStopsAtLimit checks that the walk stops at the first
// file past the limit instead of reading the rest of a huge tree.
func TestCheckWorkingDirStopsAtLimit(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a/big#": "600Mi"}
	for _, d := range []string{"b", "c", "d"} {
		files[d+"/unreadable/"] = ""
	}
	dir := layout(t, files)
	for _, d := range []string{"b", "c", "d"} {
		// a directory that is never reached cannot fail the walk
		if err := os.Symlink("missing", filepath.Join(dir, d, "unreadable", "dangling")); err != nil {
			t.Fatal(err)
		}
	}
	_, err := raysubmit.CheckWorkingDir(t.Context(), dir, raysubmit.PackageOptions{})
	if !errors.Is(err, raysubmit.ErrPackageTooLarge) {
		t.Fatalf("CheckWorkingDir = %v, want ErrPackageTooLarge (the walk went on past the limit)", err)
	}
}

// TestBuildPackageExcludes checks gitignore semantics of excludes in the
// zip: anchored and unanchored patterns, directories, negation, and that
// excludes win over a .gitignore's negation.
func TestBuildPackageExcludes(t *testing.T) {
	t.Parallel()
	dir := layout(t, map[string]string{
		"main.py":          "",
		"secret.txt":       "",
		"sub/secret.txt":   "",
		"logs/a.log":       "",
		"keep.log":         "",
		"data/raw/x.csv":   "",
		"src/data/y.csv":   "",
		".gitignore":       "!secret.txt\n",
		"models/model.bin": "",
	})
	opts := raysubmit.PackageOptions{Excludes: []string{"secret.txt", "*.log", "!keep.log", "/data/", "models/*.bin"}}
	pkg, err := raysubmit.BuildPackage(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pkg.Remove()
	want := []string{".gitignore", "keep.log", "logs/", "main.py", "models/", "src/", "src/data/", "src/data/y.csv", "sub/"}
	if diff := cmp.Diff(want, zipNames(t, pkg)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func zipNames(t *testing.T, pkg *raysubmit.Package) []string {
	t.Helper()
	zr, err := zip.NewReader(pkg.Open(), pkg.Size)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names
}

// TestBuildPackageCancel cancels packaging a 20 GiB (sparse) file once the
// zip is being written: BuildPackage must return context.Canceled soon
// and leave no zip behind. Without the context check the copy would go on
// for minutes.
func TestBuildPackageCancel(t *testing.T) {
	t.Parallel()
	dir := layout(t, map[string]string{"main.py": "", "data/huge.bin#": "20Gi"})
	tmp := t.TempDir()
	opts := raysubmit.PackageOptions{MaxSize: 1 << 40, TempDir: tmp}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, err := raysubmit.BuildPackage(ctx, dir, opts)
		done <- result{err, time.Now()}
	}()
	waitZipGrows(t, tmp, done)
	cancel()
	cancelled := time.Now()
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute): // only catches a hang; the time is logged below
		t.Fatal("BuildPackage still running a minute after its context was cancelled")
	}
	t.Logf("BuildPackage returned %v after the cancel", r.at.Sub(cancelled))
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("BuildPackage = %v, want context.Canceled", r.err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
	if open := openZips(tmp); len(open) != 0 {
		t.Errorf("the unfinished zip is still open: %v", open)
	}
}

// waitZipGrows waits until this process's zip in dir holds data, so the
// copy is under way.
func waitZipGrows[T any](t *testing.T, dir string, done <-chan T) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, fd := range openZips(dir) {
			if fi, err := os.Stat(fd); err == nil && fi.Size() > 0 {
				return
			}
		}
		select {
		case r := <-done:
			t.Fatalf("BuildPackage ended before the test cancelled it: %v", r)
		case <-tick.C:
		}
	}
}

// openZips returns this process's open package files in dir, as
// /proc/self/fd paths: a package has no name in dir, so this is where it is.
func openZips(dir string) []string {
	var out []string
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		link := filepath.Join("/proc/self/fd", fd.Name())
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, filepath.Join(dir, "raystep-pkg-")) {
			out = append(out, link)
		}
	}
	return out
}

// TestBuildPackageLeavesNoName: a package has no name on disk from the
// moment it is created, so a raystep killed while it waits for its cluster
// leaves no zip of the working dir behind; Remove releases its space.
func TestBuildPackageLeavesNoName(t *testing.T) {
	t.Parallel()
	dir := layout(t, map[string]string{"main.py": "print('hi')\n"})
	tmp := t.TempDir()
	pkg, err := raysubmit.BuildPackage(t.Context(), dir, raysubmit.PackageOptions{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
		t.Errorf("a package left names on disk: %v", left)
	}
	if got := zipNames(t, pkg); !slices.Equal(got, []string{"main.py"}) || len(openZips(tmp)) != 1 {
		t.Errorf("package holds %v in %d open files, want main.py in one", got, len(openZips(tmp)))
	}
	// Two readers at once, as a retried upload may have: each reads the whole zip.
	a, b := pkg.Open(), pkg.Open()
	ba, _ := io.ReadAll(a)
	bb, _ := io.ReadAll(b)
	if int64(len(ba)) != pkg.Size || !bytes.Equal(ba, bb) {
		t.Errorf("readers read %d and %d bytes of %d", len(ba), len(bb), pkg.Size)
	}
	if err := pkg.Remove(); err != nil {
		t.Fatal(err)
	}
	if open := openZips(tmp); len(open) != 0 {
		t.Errorf("package still open after Remove: %v", open)
	}
}
