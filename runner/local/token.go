package local

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/raystep/raystep/fleet"
)

// TokenSources are where the token of an existing Ray cluster is found:
// raystep's own variable, then what Ray's own tools use.
type TokenSources struct {
	// Raystep is $RAYSTEP_DASHBOARD_TOKEN, Env $RAY_AUTH_TOKEN, Path
	// $RAY_AUTH_TOKEN_PATH and Home $HOME.
	Raystep, Env, Path, Home string
}

// Find returns the token and where it came from: RAYSTEP_DASHBOARD_TOKEN,
// else, in Ray's order, RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH
// names, ~/.ray/auth_token (first line, trimmed). Like Ray, it fails
// (fleet.ErrUsage) when RAY_AUTH_TOKEN_PATH names a file that is missing
// or empty, and finds no token when ~/.ray/auth_token is missing.
func (s TokenSources) Find() (token, from string, err error) {
	switch {
	case s.Raystep != "":
		return s.Raystep, "RAYSTEP_DASHBOARD_TOKEN", nil
	case strings.TrimSpace(s.Env) != "":
		return strings.TrimSpace(s.Env), "RAY_AUTH_TOKEN", nil
	case s.Path != "":
		from = "RAY_AUTH_TOKEN_PATH=" + s.Path
		if token, err = ReadToken(s.Path); err != nil {
			return "", "", fleet.AsUsage(fmt.Errorf("read the ray auth token of %s: %w", from, err))
		}
		return token, from, nil
	case s.Home != "":
		from = filepath.Join(s.Home, ".ray", "auth_token")
		token, err = ReadToken(from)
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", nil
		}
		if err != nil {
			return "", "", fleet.AsUsage(fmt.Errorf("read the ray auth token: %w", err))
		}
		return token, from, nil
	}
	return "", "", nil
}
