package kuberay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// The secrets of an interactive cluster (its Ray token, its notebook's
// token) live in Secrets owned by its RayCluster, which up creates. up
// also keeps a copy on the machine that made them, under
// Interactive.KeepDir, readable by its user only, and the commands that
// need them (run --cluster, notebook, dashboard, up again) read that copy
// first: people then need create on secrets, not get, which would let
// every engineer of the namespace read every cluster's tokens and every
// other Secret there. The copy is per cluster UID, so a new cluster of the
// same name never meets an old one's; down forgets it.

// Kept file names: KeptRayToken holds the Ray token alone.
const (
	KeptRayToken = "ray-token"
	keptNotebook = "notebook.json"
)

// keptDir is where rc's kept secrets are, "" when nothing is kept.
func (i *Interactive) keptDir(rc *rayv1.RayCluster) string {
	if i.KeepDir == "" || rc.UID == "" {
		return ""
	}
	return filepath.Join(i.KeepDir, rc.Namespace, rc.Name+"-"+string(rc.UID))
}

// KeptPath is the file that holds rc's kept what ("" when nothing is kept
// or there is no such file): for people to read, e.g. the Ray token.
func (i *Interactive) KeptPath(rc *rayv1.RayCluster, what string) string {
	dir := i.keptDir(rc)
	if dir == "" {
		return ""
	}
	p := filepath.Join(dir, what)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// keep writes data as rc's what, readable by the user only. A failure is
// reported, not fatal to up: the Secret holds the same.
func (i *Interactive) keep(rc *rayv1.RayCluster, what string, data []byte) error {
	dir := i.keptDir(rc)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("keep the %s of RayCluster %s/%s on this machine: %w", what, rc.Namespace, rc.Name, err)
	}
	p := filepath.Join(dir, what)
	_ = os.Remove(p)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return fmt.Errorf("keep the %s of RayCluster %s/%s on this machine: %w", what, rc.Namespace, rc.Name, err)
	}
	return nil
}

// kept reads rc's what; fs.ErrNotExist when this machine keeps none.
func (i *Interactive) kept(rc *rayv1.RayCluster, what string) ([]byte, error) {
	dir := i.keptDir(rc)
	if dir == "" {
		return nil, fs.ErrNotExist
	}
	return os.ReadFile(filepath.Join(dir, what))
}

// Forget removes what this machine keeps of the clusters named name in
// namespace ns, whatever their UIDs: down calls it once the cluster is gone.
func (i *Interactive) Forget(ns, name string) error {
	if i.KeepDir == "" {
		return nil
	}
	dirs, _ := filepath.Glob(filepath.Join(i.KeepDir, ns, name+"-????????-????-????-????-????????????")) // name-UID
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	_ = os.Remove(filepath.Join(i.KeepDir, ns)) // once it holds no cluster's
	return errors.Join(errs...)
}
