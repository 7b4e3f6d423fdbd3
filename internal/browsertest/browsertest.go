// Package browsertest runs Debian's chromium headless for a test, driven
// through github.com/chromedp/chromedp: the web console's tests click in a
// real browser. A missing chromium fails the test with what to install; it
// is never skipped.
package browsertest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ErrNoChromium reports that no chromium binary was found.
var ErrNoChromium = errors.New("browsertest: no chromium: install Debian's chromium (make chromium, or sudo apt-get install chromium)")

// candidates are the names and paths chromium goes by, most likely first.
var candidates = []string{"chromium", "chromium-browser", "/usr/bin/chromium", "/usr/lib/chromium/chromium"}

// ExecPath returns the path of the chromium binary, or ErrNoChromium.
func ExecPath() (string, error) {
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// New starts a headless chromium for t, in the zone UTC, and returns the
// context of its first tab, for chromedp.Run. The browser stops, and its
// goroutines end, at t's cleanup, so that goleak finds none of them.
func New(t testing.TB) context.Context {
	t.Helper()
	return NewInZone(t, "UTC")
}

// NewInZone is New with the browser in the time zone zone, an IANA name
// such as "Asia/Kolkata": the zone its pages show local times in.
func NewInZone(t testing.TB, zone string) context.Context {
	t.Helper()
	path, err := ExecPath()
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.Env("TZ="+zone))
	if os.Geteuid() == 0 {
		// chromium refuses to start its sandbox as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, stopAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(stopAlloc) // runs last: it waits for the browser process to end
	closeAtCleanup(t, ctx, cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browsertest: starting %s: %v", path, err)
	}
	return ctx
}

// Tab returns the context of a new tab of browser (a context from
// [New]), closed at t's cleanup.
func Tab(t testing.TB, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	closeAtCleanup(t, ctx, cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	return ctx
}

// closeAtCleanup closes the tab (and for the first tab, the browser) of
// ctx at t's cleanup: gracefully for up to 10 seconds, then by cancel.
func closeAtCleanup(t testing.TB, ctx context.Context, cancel context.CancelFunc) {
	t.Cleanup(func() {
		stop, done := context.WithTimeout(ctx, 10*time.Second)
		defer done()
		_ = chromedp.Cancel(stop)
		cancel()
	})
}
