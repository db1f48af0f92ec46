package raysubmit

import (
	"bufio"
	"os"
	"path"
	"regexp"
	"strings"
)

// ignoreRule is one gitignore-style pattern, compiled.
type ignoreRule struct {
	base    string // directory (slash-separated, relative to the root) the rule applies under
	re      *regexp.Regexp
	negate  bool
	dirOnly bool
}

// ignoreSet holds rules in the order they apply; the last match wins, as in git.
type ignoreSet []ignoreRule

// parseIgnore compiles gitignore-style lines found in directory base.
func parseIgnore(base string, lines []string) ignoreSet {
	var set ignoreSet
	for _, line := range lines {
		line = strings.TrimRight(line, " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{base: base}
		if strings.HasPrefix(line, "!") {
			r.negate, line = true, line[1:]
		}
		line = strings.TrimPrefix(line, `\`)
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		anchored := strings.Contains(line, "/")
		line = strings.TrimPrefix(line, "/")
		if line == "" {
			continue
		}
		expr := globRegexp(line)
		if !anchored {
			expr = "(?:.*/)?" + expr
		}
		re, err := regexp.Compile("^" + expr + "$")
		if err != nil {
			continue
		}
		r.re = re
		set = append(set, r)
	}
	return set
}

// globRegexp translates a gitignore glob (with ** segments) to a regexp.
func globRegexp(glob string) string {
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case strings.HasPrefix(glob[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(glob[i:], "/**") && i+3 == len(glob):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(glob[i:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := strings.Replace(glob[i+1:i+j], "!", "^", 1)
			b.WriteString("[" + class + "]")
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// ignored reports whether rel (slash-separated, relative to the root) is
// excluded. A path under an excluded directory never gets here: the walk
// does not descend into it.
func (s ignoreSet) ignored(rel string, isDir bool) bool {
	ignored := false
	for _, r := range s {
		if r.dirOnly && !isDir {
			continue
		}
		sub := rel
		if r.base != "" {
			if !strings.HasPrefix(rel, r.base+"/") {
				continue
			}
			sub = strings.TrimPrefix(rel, r.base+"/")
		}
		if r.re.MatchString(sub) {
			ignored = !r.negate
		}
	}
	return ignored
}

// readIgnoreFile returns the rules of dir/name (slash path base), if any.
func readIgnoreFile(dir, base, name string) ignoreSet {
	f, err := os.Open(path.Join(dir, name))
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return parseIgnore(base, lines)
}
