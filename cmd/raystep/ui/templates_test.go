package ui

import (
	"io/fs"
	"path"
	"testing"
)

// TestTemplatesParse: every page's template parses. They are parsed on
// first use, so a broken one would otherwise show only when its page is
// first served. Each embedded page is one of the templates the server
// uses, and each of those parses.
func TestTemplatesParse(t *testing.T) {
	t.Parallel()
	pages := map[string]func(){
		"page.html":         func() { page() },
		"detail.html":       func() { detailPage() },
		"history.html":      func() { historyPage() },
		"history_step.html": func() { historyStepPage() },
		"log.html":          func() { logPage() },
	}
	embedded, err := fs.Glob(assets, "assets/*.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range embedded {
		if _, ok := pages[path.Base(name)]; !ok {
			t.Errorf("%s is embedded but no page parses it", name)
		}
	}
	for name, parse := range pages {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: %v", name, r)
				}
			}()
			parse()
		}()
	}
}
