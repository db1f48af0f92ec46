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

// TestArchitectureNamesEveryPackage: the README's "How it is built", one
// line a package, and docs/architecture.md, the package map a newcomer
// reads next, name every Go package of the tree in their tables, and no
// package that is gone.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	t.Parallel()
	const root = "../.."
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
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := strings.CutPrefix(string(readme[strings.Index(string(readme), "\n## How it is built\n")+1:]), "## How it is built\n")
	if !ok {
		t.Fatal("README.md has no section \"How it is built\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range []struct {
		name, text string
		oneEach    bool
	}{{"README.md's How it is built", section, true}, {"docs/architecture.md", string(arch), false}} {
		named := map[string]bool{}
		for _, row := range regexp.MustCompile(`(?m)^\| ([^|]+) \|`).FindAllStringSubmatch(page.text, -1) {
			names := regexp.MustCompile("`([a-z][a-z0-9_/.-]*)`").FindAllStringSubmatch(row[1], -1)
			if page.oneEach && len(names) > 1 {
				t.Errorf("%s: row %q names %d packages, want one line each", page.name, row[1], len(names))
			}
			for _, m := range names {
				named[m[1]] = true
			}
		}
		for _, p := range pkgs {
			if !named[p] {
				t.Errorf("%s names no package %s: add a row that says what it owns", page.name, p)
			}
		}
		for p := range named {
			if !slices.Contains(pkgs, p) {
				t.Errorf("%s names package %s, which is not in the tree", page.name, p)
			}
		}
	}
}

// TestDocsLinksResolve: every relative link in README.md, docs/ and
// schemas/SPEC.md names a file of the tree and, with a #fragment, a
// heading of that file, so that the pages the README was split into stay
// one web a newcomer can follow.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	const root = "../.."
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := filepath.Glob(filepath.Join(root, "docs", "cli", "*.md"))
	pages = append(append(pages, cli...), filepath.Join(root, "README.md"), filepath.Join(root, "schemas", "SPEC.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(string(text)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %v", page, target, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(t, path), frag) {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, path, frag)
			}
		}
	}
}

// stripCode drops fenced code blocks, whose text is no Markdown.
func stripCode(s string) string {
	var out []string
	fence := false
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// anchors are the #fragments GitHub gives the headings of the Markdown
// file path.
func anchors(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	for line := range strings.SplitSeq(stripCode(string(b)), "\n") {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		out = append(out, strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-"))
	}
	return out
}
