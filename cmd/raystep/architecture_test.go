package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage: docs/architecture.md, the package map
// a newcomer reads first, names every Go package of the tree in its
// tables, and no package that is gone.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	t.Parallel()
	const root, page = "../..", "../../docs/architecture.md"
	var pkgs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "out" || name == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if !slices.Contains(pkgs, rel) {
				pkgs = append(pkgs, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, row := range regexp.MustCompile(`(?m)^\| ([^|]+) \|`).FindAllStringSubmatch(string(text), -1) {
		for _, m := range regexp.MustCompile("`([a-z][a-z0-9_/.-]*)`").FindAllStringSubmatch(row[1], -1) {
			named[m[1]] = true
		}
	}
	for _, p := range pkgs {
		if !named[p] {
			t.Errorf("%s names no package %s: add a row that says what it owns", page, p)
		}
	}
	for p := range named {
		if !slices.Contains(pkgs, p) {
			t.Errorf("%s names package %s, which is not in the tree", page, p)
		}
	}
}
