package runner

import (
	"context"
	"fmt"
)

// Package is a step's working directory zipped for Ray (Runner.Pack).
type Package interface {
	// URI is the package's runtime_env working_dir, e.g.
	// gcs://_ray_pkg_<sha1>.zip.
	URI() string
	// Bytes is the package's size.
	Bytes() int64
	// Remove releases the package. The runner calls it once the package
	// is uploaded, or when the step ends before that.
	Remove() error
}

// packing is the working dir's package being built while the cluster is
// provisioned: zipping a working dir of some tens of MiB takes a second or
// more, which the step no longer waits for after the cluster is up.
type packing struct {
	cancel context.CancelFunc
	done   chan struct{} // closed once Pack returned
	pkg    Package
	err    error
}

// startPacking starts building the step's working-dir package, when it has
// one. A package that cannot be built fails the step at once, as the
// upload would: the cluster it waits for would serve no purpose.
func (s *state) startPacking(ctx context.Context) {
	if s.step.WorkingDir == "" {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &packing{cancel: cancel, done: make(chan struct{})}
	s.pack = p
	dir, excludes, pack, fail := s.step.WorkingDir, s.step.Excludes, s.r.Pack, s.fail
	go func() {
		defer close(p.done)
		p.pkg, p.err = pack(ctx, dir, excludes)
		if p.err != nil && ctx.Err() == nil {
			fail(&InfraError{Phase: PhaseUpload, Err: uploadErr(dir, p.err)})
		}
	}()
}

// uploadErr says which working dir could not be packaged or uploaded.
func uploadErr(dir string, err error) error {
	return fmt.Errorf("upload working dir %s: %w", dir, err)
}

// upload uploads the working dir's package, once it is built, when the
// step has a working dir.
func (s *state) upload(ctx context.Context) error {
	p := s.pack
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if p.err != nil {
		return uploadErr(s.step.WorkingDir, p.err)
	}
	if err := s.jobs.UploadPackage(ctx, p.pkg); err != nil {
		return uploadErr(s.step.WorkingDir, err)
	}
	s.uri = p.pkg.URI()
	s.dropPackage()
	s.note(PhaseUpload, "working dir %s uploaded as %s (%s)", s.step.WorkingDir, s.uri, sizeText(p.pkg.Bytes()))
	return nil
}

// dropPackage stops building the package, waits until Pack returned, and
// removes the package. It runs after the upload and on every path that
// ends the step before it.
func (s *state) dropPackage() {
	p := s.pack
	if p == nil {
		return
	}
	s.pack = nil
	p.cancel()
	<-p.done
	if p.err == nil && p.pkg != nil {
		_ = p.pkg.Remove()
	}
}

// sizeText renders a byte count for people: 812 B, 3.4 KiB, 6.1 MiB.
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
