package raysubmit

import (
	"archive/zip"
	"cmp"
	"context"
	"crypto/sha1" //nolint:gosec // Ray names packages by SHA-1; not a security boundary
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
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
	// Excludes are gitignore patterns relative to the directory, matched
	// as a .gitignore file at its root would be, and over any .gitignore
	// or .rayignore file.
	Excludes []string
	// IgnoreGitignore disables honouring .gitignore files (.rayignore
	// files are always honoured, as Ray does).
	IgnoreGitignore bool
	// MaxSize overrides MaxPackageSize, for clusters that raise the limit.
	// It bounds the files' total size before compression and the zip.
	MaxSize int64
	// MaxEntries overrides MaxWorkingDirEntries.
	MaxEntries int
	// TempDir is where BuildPackage writes the zip; os.TempDir() when empty.
	TempDir string
}

// zipEpoch is the timestamp of every entry, so equal trees zip to equal bytes.
var zipEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Package is a working directory zipped into a temporary file that has
// no name on disk: whatever ends this process, a SIGKILL included, the
// kernel frees it, so no zip of a working dir is ever left behind.
type Package struct {
	// Name is _ray_pkg_<sha1 of the zip>.zip.
	Name string
	// Size is the zip's size in bytes.
	Size int64
	file *os.File // the zip, already unlinked
}

// URI returns the package's runtime_env URI, gcs://<Name>.
func (p *Package) URI() string { return "gcs://" + p.Name }

// Open returns a reader of the whole zip, independent of any other.
func (p *Package) Open() *io.SectionReader { return io.NewSectionReader(p.file, 0, p.Size) }

// Remove releases the zip; its space returns to the file system.
func (p *Package) Remove() error { return p.file.Close() }

// BuildPackage zips dir deterministically (entries sorted, fixed
// timestamps, .git, .gitignore'd, .rayignore'd and excluded paths left
// out) into a temporary file, unlinked as soon as it is created, and names
// the package by content hash. It checks dir as CheckWorkingDir does
// before writing anything, and stops soon after ctx ends. A package of the
// maximum size or more is ErrPackageTooLarge.
func BuildPackage(ctx context.Context, dir string, opts PackageOptions) (*Package, error) {
	t, err := walkWorkingDir(ctx, dir, opts)
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(opts.TempDir, "raystep-pkg-*.zip")
	if err != nil {
		return nil, fmt.Errorf("create package file: %w", err)
	}
	if err := os.Remove(tmp.Name()); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("unlink package file: %w", err)
	}
	h := sha1.New() //nolint:gosec // see import
	err = writeZip(ctx, io.MultiWriter(tmp, h), t.entries)
	size, _ := tmp.Seek(0, io.SeekCurrent)
	limit := cmp.Or(opts.MaxSize, MaxPackageSize)
	if err == nil && size >= limit {
		err = fmt.Errorf("%w: working dir %s zips to %s, Ray takes less than %s: exclude large files "+
			"with runtimeEnv.excludes, .rayignore or .gitignore", ErrPackageTooLarge, dir, mib(size), mib(limit))
	}
	if err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("package %s: %w", dir, err)
	}
	name := "_ray_pkg_" + hex.EncodeToString(h.Sum(nil)) + ".zip"
	return &Package{Name: name, Size: size, file: tmp}, nil
}

// writeZip writes entries, in order, as a zip.
func writeZip(ctx context.Context, w io.Writer, entries []entry) error {
	zw := zip.NewWriter(w)
	for _, e := range entries {
		if err := addEntry(ctx, zw, e); err != nil {
			return err
		}
	}
	return zw.Close()
}

func addEntry(ctx context.Context, zw *zip.Writer, e entry) error {
	hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: zipEpoch}
	mode := fs.FileMode(0o644)
	if e.src == "" {
		mode, hdr.Method = fs.ModeDir|0o755, zip.Store
	} else if e.info.Mode()&0o111 != 0 {
		mode = 0o755
	}
	hdr.SetMode(mode)
	w, err := zw.CreateHeader(hdr)
	if err != nil || e.src == "" {
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, ctxReader{ctx: ctx, r: f})
	return err
}

// ctxReader fails its next Read once ctx is done, so a copy of a big file
// stops within one buffer (32 KiB with io.Copy) of a cancel.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// UploadWorkingDir packages dir and uploads it unless the cluster already
// has it, and returns the URI for runtime_env.working_dir.
func (c *Client) UploadWorkingDir(ctx context.Context, dir string, opts PackageOptions) (string, error) {
	pkg, err := BuildPackage(ctx, dir, opts)
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
	body := retryablehttp.ReaderFunc(func() (io.Reader, error) { return pkg.Open(), nil })
	req, err = c.newRequest(ctx, http.MethodPut, p, body)
	if err != nil {
		return err
	}
	req.ContentLength = pkg.Size
	req.Header.Set("Content-Type", "application/zip")
	if err := c.do(req, nil); err != nil {
		return fmt.Errorf("upload package %s (%d bytes): %w", pkg.Name, pkg.Size, err)
	}
	c.Logger.Debug("package uploaded", zap.String("package", pkg.Name), zap.Int64("bytes", pkg.Size))
	return nil
}
