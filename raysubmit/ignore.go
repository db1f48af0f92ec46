package raysubmit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// PatternError is an exclude pattern, or a line of a .gitignore or
// .rayignore file, that is not a valid gitignore pattern.
type PatternError struct {
	// File is the ignore file, empty for PackageOptions.Excludes.
	File string
	// Index is the pattern's index in Excludes, or its 1-based line in File.
	Index int
	// Pattern is the pattern as written.
	Pattern string
	// Err says what is wrong with it.
	Err error
}

// Error names the pattern and where it was written.
func (e *PatternError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("excludes[%d] %q: %v", e.Index, e.Pattern, e.Err)
	}
	return fmt.Sprintf("%s:%d: pattern %q: %v", e.File, e.Index, e.Pattern, e.Err)
}

// Unwrap returns the reason.
func (e *PatternError) Unwrap() error { return e.Err }

// errBadPattern is the reason for a pattern with a broken [class] or a
// trailing backslash.
var errBadPattern = errors.New("not a valid gitignore pattern (an unclosed [ or a trailing \\?)")

// ignoreRules are gitignore patterns in increasing priority, matched by
// go-git's gitignore package (git's own rules: the last matching pattern
// wins, a pattern applies under the directory of the file it is in).
type ignoreRules []gitignore.Pattern

// defaultRules leave out .git directories (Ray packages them; they are
// rarely wanted on a cluster and often the biggest part of a checkout).
func defaultRules() ignoreRules { return ignoreRules{gitignore.ParsePattern(".git/", nil)} }

// ignored reports whether the slash path rel (relative to the root) is
// excluded.
func (r ignoreRules) ignored(rel string, isDir bool) bool {
	return gitignore.NewMatcher(r).Match(strings.Split(rel, "/"), isDir)
}

// parsePattern compiles one line found in directory domain (split at
// slashes, nil for the root); ok is false for blank lines and comments.
// go-git matches a broken pattern as nothing, so it is refused here.
func parsePattern(line string, domain []string) (p gitignore.Pattern, ok bool, err error) {
	if !strings.HasSuffix(line, `\ `) {
		line = strings.TrimRight(line, " \t\r")
	}
	if line == "" || strings.HasPrefix(line, "#") {
		return nil, false, nil
	}
	for _, seg := range strings.Split(strings.TrimPrefix(line, "!"), "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return nil, false, errBadPattern
		}
	}
	return gitignore.ParsePattern(line, domain), true, nil
}

// excludeRules compiles PackageOptions.Excludes, patterns relative to the
// root.
func excludeRules(excludes []string) (ignoreRules, error) {
	var rules ignoreRules
	for i, line := range excludes {
		p, ok, err := parsePattern(line, nil)
		if err != nil {
			return nil, &PatternError{Index: i, Pattern: line, Err: err}
		}
		if ok {
			rules = append(rules, p)
		}
	}
	return rules, nil
}

// readIgnoreFile returns the patterns of dir/name, whose slash path
// relative to the root is rel ("" for the root); none when it does not
// exist.
func readIgnoreFile(dir, rel, name string) (ignoreRules, error) {
	file := filepath.Join(dir, name)
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var domain []string
	if rel != "" {
		domain = strings.Split(rel, "/")
	}
	var rules ignoreRules
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		p, ok, err := parsePattern(sc.Text(), domain)
		if err != nil {
			return nil, &PatternError{File: file, Index: n, Pattern: sc.Text(), Err: err}
		}
		if ok {
			rules = append(rules, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return rules, nil
}
