package browser

import (
	"bytes"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTab opens a page in chromium, reads it back, saves a screenshot
// that decodes as a PNG, and after the test finds no chromium process of
// its profile left.
func TestTab(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>probe</title><p id="p">hello from raystep</p>`))
	}))
	defer srv.Close()
	var profile, shot string
	t.Run("page", func(t *testing.T) {
		tab := New(t)
		profile = tab.proc.profile
		if len(running(profile)) == 0 {
			t.Fatal("no chromium process of the tab's profile found while it runs")
		}
		if err := chromedp.Do(tab.Ctx, chromedp.Navigate(srv.URL)); err != nil {
			t.Fatal(err)
		}
		text, err := chromedp.Run(tab.Ctx, chromedp.Text(chromedp.ID("p")))
		if err != nil || text != "hello from raystep" {
			t.Fatalf("text of #p = %q, %v; want the page's", text, err)
		}
		shot = tab.Shot("probe")
	})
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("%s is no PNG: %v", shot, err)
	}
	if left := running(profile); len(left) > 0 {
		t.Errorf("chromium processes %v run after the test", left)
	}
}
