package raysubmit

import (
	"archive/zip"
	"context"
	"crypto/sha1" //nolint:gosec // Ray names packages by SHA-1; not a security boundary
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/zap"
)

// MaxPackageSize is the largest package Ray stores: its GCS refuses a
// package of this size or more (GCS_STORAGE_MAX_SIZE, the gRPC message
// limit of 512 MiB, unless the cluster sets RAY_max_grpc_message_size).
const MaxPackageSize = 512 << 20

// ErrPackageTooLarge means a working directory zips to MaxPackageSize or more.
var ErrPackageTooLarge = errors.New("package too large for Ray")

// PackageOptions says what goes into a working-directory package.
type PackageOptions struct {
	// Excludes are gitignore-style patterns relative to the directory.
	Excludes []string
	// IgnoreGitignore disables honouring .gitignore files (.rayignore
	// files are always honoured, as Ray does).
	IgnoreGitignore bool
	// MaxSize overrides MaxPackageSize, for clusters that raise the limit.
	MaxSize int64
}

// zipEpoch is the timestamp of every entry, so equal trees zip to equal bytes.
var zipEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Package is a working directory zipped into a temporary file.
type Package struct {
	// Name is _ray_pkg_<sha1 of the zip>.zip.
	Name string
	// Path is the zip file; Remove deletes it.
	Path string
	// Size is the zip's size in bytes.
	Size int64
}

// URI returns the package's runtime_env URI, gcs://<Name>.
func (p *Package) URI() string { return "gcs://" + p.Name }

// Remove deletes the zip file.
func (p *Package) Remove() error { return os.Remove(p.Path) }

// BuildPackage zips dir deterministically (entries sorted, fixed
// timestamps, .git, .gitignore'd, .rayignore'd and excluded paths left
// out) into a temporary file named by content hash. A package of the
// maximum size or more is ErrPackageTooLarge.
func BuildPackage(dir string, opts PackageOptions) (*Package, error) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("working dir %s: not a directory", dir)
	}
	tmp, err := os.CreateTemp("", "raystep-pkg-*.zip")
	if err != nil {
		return nil, fmt.Errorf("create package file: %w", err)
	}
	h := sha1.New() //nolint:gosec // see import
	err = writeZip(io.MultiWriter(tmp, h), dir, opts)
	size, _ := tmp.Seek(0, io.SeekCurrent)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	limit := opts.MaxSize
	if limit == 0 {
		limit = MaxPackageSize
	}
	if err == nil && size >= limit {
		err = fmt.Errorf("working dir %s zips to %d bytes, Ray accepts less than %d: exclude large files "+
			"with .gitignore, .rayignore or excludes: %w", dir, size, limit, ErrPackageTooLarge)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return nil, fmt.Errorf("package %s: %w", dir, err)
	}
	name := "_ray_pkg_" + hex.EncodeToString(h.Sum(nil)) + ".zip"
	return &Package{Name: name, Path: tmp.Name(), Size: size}, nil
}

func writeZip(w io.Writer, root string, opts PackageOptions) error {
	zw := zip.NewWriter(w)
	rules := parseIgnore("", append([]string{".git/"}, opts.Excludes...))
	if err := addDir(zw, root, "", rules, !opts.IgnoreGitignore); err != nil {
		return err
	}
	return zw.Close()
}

// addDir adds the entries of root/rel in name order, recursively.
func addDir(zw *zip.Writer, root, rel string, rules ignoreSet, gitignore bool) error {
	dir := filepath.Join(root, filepath.FromSlash(rel))
	rules = append(rules[:len(rules):len(rules)], readIgnoreFile(dir, rel, ".rayignore")...)
	if gitignore {
		rules = append(rules, readIgnoreFile(dir, rel, ".gitignore")...)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := path.Join(rel, e.Name())
		info, err := os.Stat(filepath.Join(dir, e.Name())) // follows symlinks
		if err != nil {
			return err
		}
		if rules.ignored(name, info.IsDir()) {
			continue
		}
		if info.IsDir() {
			if e.Type()&fs.ModeSymlink != 0 {
				continue // avoid cycles
			}
			if err := addEntry(zw, name+"/", info, ""); err != nil {
				return err
			}
			if err := addDir(zw, root, name, rules, gitignore); err != nil {
				return err
			}
			continue
		}
		if info.Mode().IsRegular() {
			if err := addEntry(zw, name, info, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func addEntry(zw *zip.Writer, name string, info fs.FileInfo, file string) error {
	hdr := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: zipEpoch}
	mode := fs.FileMode(0o644)
	if info.IsDir() {
		mode, hdr.Method = fs.ModeDir|0o755, zip.Store
	} else if info.Mode()&0o111 != 0 {
		mode = 0o755
	}
	hdr.SetMode(mode)
	w, err := zw.CreateHeader(hdr)
	if err != nil || file == "" {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// UploadWorkingDir packages dir and uploads it unless the cluster already
// has it, and returns the URI for runtime_env.working_dir.
func (c *Client) UploadWorkingDir(ctx context.Context, dir string, opts PackageOptions) (string, error) {
	pkg, err := BuildPackage(dir, opts)
	if err != nil {
		return "", err
	}
	defer func() { _ = pkg.Remove() }()
	if err := c.UploadPackage(ctx, pkg); err != nil {
		return "", err
	}
	return pkg.URI(), nil
}

// UploadPackage uploads pkg with PUT /api/packages/gcs/<name>, after a GET
// that skips the upload when the cluster already has it.
func (c *Client) UploadPackage(ctx context.Context, pkg *Package) error {
	p := "/api/packages/gcs/" + pkg.Name
	req, err := c.newRequest(ctx, http.MethodGet, p, nil)
	if err != nil {
		return err
	}
	switch err := c.do(req, nil); {
	case err == nil:
		c.Logger.Debug("package already uploaded", zap.String("package", pkg.Name))
		return nil
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("check package %s: %w", pkg.Name, err)
	}
	body := retryablehttp.ReaderFunc(func() (io.Reader, error) { return os.Open(pkg.Path) })
	req, err = c.newRequest(ctx, http.MethodPut, p, body)
	if err != nil {
		return err
	}
	req.ContentLength = pkg.Size
	req.Header.Set("Content-Type", "application/zip")
	if err := c.do(req, nil); err != nil {
		return fmt.Errorf("upload package %s (%d bytes): %w", pkg.Name, pkg.Size, err)
	}
	c.Logger.Info("package uploaded", zap.String("package", pkg.Name), zap.Int64("bytes", pkg.Size))
	return nil
}
