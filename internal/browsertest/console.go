package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A Column is a column of the web console's tasks table.
type Column int

// The tasks table's columns, in the page's order.
const (
	ColName Column = iota
	ColCron
	ColLock
	ColNext
	ColPaused
	ColLastRun
	ColClusterLastRun
	ColLastFire // the last fire on this node, run or not, and the node's counts
	ColBackfill
	ColHealth // the task's health state, since when; its reason in the title
)

// waitTimeout bounds every wait for the page: its refresh is every 2s.
const waitTimeout = 30 * time.Second

// A Console is admin's web console open in a browser tab. Its methods
// fail the test.
type Console struct {
	t   testing.TB
	tab context.Context
}

// OpenConsole loads the console at url in tab (a context from [New] or
// [Tab]) and waits for its first load of the tasks.
func OpenConsole(t testing.TB, tab context.Context, url string) *Console {
	t.Helper()
	c := &Console{t: t, tab: tab}
	c.Do("loading the console at "+url, chromedp.Navigate(url))
	c.WaitFor("the first load of the tasks", `document.getElementById("updated").textContent !== ""`)
	return c
}

// JS returns v as a JavaScript literal.
func JS(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Do runs chromedp actions in the console's tab.
func (c *Console) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.tab, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// Eval returns the value of the JavaScript expression expr in the
// console's tab.
func Eval[T any](c *Console, expr string) T {
	c.t.Helper()
	v, err := chromedp.Run(c.tab, chromedp.Evaluate[T](expr))
	if err != nil {
		c.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// WaitFor waits until the JavaScript expression cond is true, and fails
// the test with what it waited for and what the page shows if it does not
// come within 30 seconds.
func (c *Console) WaitFor(what, cond string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.tab, waitTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		shown, _ := chromedp.Run(c.tab, chromedp.Evaluate[string](`["health", "message", "updated", "tasks"].map(id => document.getElementById(id).innerText).join(" | ")`))
		c.t.Fatalf("waiting for %s: %v; the page shows: %s", what, err, shown)
	}
}

// CellExpr is the JavaScript expression of the text in column col of the
// named task's row; null while there is no such row.
func (c *Console) CellExpr(task string, col Column) string {
	return fmt.Sprintf(`(() => { const r = [...document.querySelectorAll("#tasks tbody tr")].find(r => r.dataset.task === %s);
		return r ? r.cells[%d].textContent : null })()`, JS(c.t, task), col)
}

// Cell returns the text in column col of the named task's row, once the
// row is there.
func (c *Console) Cell(task string, col Column) string {
	c.t.Helper()
	c.WaitFor("the row of "+task, c.CellExpr(task, col)+` !== null`)
	return Eval[string](c, c.CellExpr(task, col))
}

// WaitCell waits until column col of the named task's row shows want.
func (c *Console) WaitCell(what, task string, col Column, want string) {
	c.t.Helper()
	c.WaitFor(what, c.CellExpr(task, col)+` === `+JS(c.t, want))
}

// Act clicks the named task's button for verb (run, pause or resume), and
// answers the token dialog with token unless it is "".
func (c *Console) Act(task, verb, token string) {
	c.t.Helper()
	button := chromedp.CSS(fmt.Sprintf(`#tasks tbody tr[data-task=%s] button[data-action=%s]`, JS(c.t, task), JS(c.t, verb)))
	c.Do("clicking "+verb+" of "+task, chromedp.Click(button))
	if token != "" {
		c.Do("answering the token dialog", chromedp.WaitVisible(chromedp.ID("token-input")),
			chromedp.SendKeys(chromedp.ID("token-input"), token), chromedp.Click(chromedp.ID("token-ok")))
	}
}

// Message waits for the page's status line to start with prefix, and
// returns the whole line and whether it is shown as an error.
func (c *Console) Message(prefix string) (string, bool) {
	c.t.Helper()
	c.WaitFor("a message starting "+prefix, `document.getElementById("message").textContent.startsWith(`+JS(c.t, prefix)+`)`)
	return Eval[string](c, `document.getElementById("message").textContent`),
		Eval[bool](c, `document.getElementById("message").className === "error"`)
}

// Screenshot returns a PNG of the whole page, laid out width CSS pixels
// wide.
func (c *Console) Screenshot(width int64) []byte {
	c.t.Helper()
	c.Do("setting the viewport", chromedp.EmulateViewport(width, 800))
	png, err := chromedp.Run(c.tab, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatalf("screenshot: %v", err)
	}
	return png
}

// Navigate is the action that loads url in the console's tab.
func Navigate(url string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(url) }
