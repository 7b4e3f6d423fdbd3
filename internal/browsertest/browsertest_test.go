package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/browsertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A browser and a second tab each load a page; at cleanup both close and
// the browser ends, which TestMain's goleak check holds them to.
func TestNewAndTab(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<title>" + r.URL.Query().Get("t") + "</title>"))
	}))
	t.Cleanup(srv.Close)
	browser := browsertest.New(t)
	for tab, title := range map[string]string{"first": "one", "second": "two"} {
		ctx := browser
		if tab == "second" {
			ctx = browsertest.Tab(t, browser)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?t="+title)); err != nil {
			t.Fatal(err)
		}
		if got, err := chromedp.Run(ctx, chromedp.Title()); err != nil || got != title {
			t.Errorf("%s tab: title %q (%v), want %q", tab, got, err, title)
		}
	}
}
