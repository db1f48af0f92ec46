package notebook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNone is wrapped by the errors about a cluster brought up without
// --notebook.
var ErrNone = errors.New("no notebook")

// WriteFile keeps s in path, readable by its owner only (the local
// backend keeps it beside the cluster's record).
func WriteFile(path string, s Server) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode the notebook: %w", err)
	}
	return writePrivate(path, b)
}

// WriteToken keeps token alone in path, readable by its owner only: the
// file Jupyter reads (JUPYTER_TOKEN_FILE, whole, so without a newline).
func WriteToken(path, token string) error {
	return writePrivate(path, []byte(token))
}

// writePrivate writes b to path with mode 0600. What path held is removed
// first: a file made by another hand would keep its mode and owner.
func writePrivate(path string, b []byte) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keep the notebook token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("keep the notebook token: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("keep the notebook token in %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keep the notebook token in %s: %w", path, err)
	}
	return nil
}

// ReadFile reads the server WriteFile kept in path; an error wrapping
// ErrNone when there is none.
func ReadFile(path string) (Server, error) {
	var s Server
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("%w: %s does not exist", ErrNone, path)
	}
	if err != nil {
		return s, fmt.Errorf("read the notebook token: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Token == "" || s.Port == 0 {
		return s, fmt.Errorf("read the notebook token from %s: not a notebook record (%v)", path, err)
	}
	return s, nil
}
