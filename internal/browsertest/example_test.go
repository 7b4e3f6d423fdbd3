package browsertest_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ndigo/ndigo/internal/browsertest"
)

// A test opens a page in a headless chromium and reads it; the browser
// stops at the test's cleanup.
func ExampleNew() {
	test := func(t *testing.T, url string) {
		tab := browsertest.New(t)
		if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
			t.Fatal(err)
		}
		title, err := chromedp.Run(tab, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		t.Log(title)
	}
	_ = test
}
