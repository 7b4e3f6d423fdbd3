package admin

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ndigo/ndigo/internal/browsertest"
)

// The console shows a retried fire: while its retry is pending, the task's
// row says when it is due (beside the next fire) and the task's page how
// the task retries; the fire skipped meanwhile is a skip, "skipped:
// retrying", in the row, the strip and the runs table; once the retry ran,
// its run shows as attempt 2/2 wherever runs show, and the due time goes.
func TestConsoleShowsRetries(t *testing.T) {
	r := newRetrying(t)
	r.step(t, skippedStage)
	srv := httptest.NewServer(r.h)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/#task=report")
	const due = "retry due 2026-01-01 00:02:58.112 UTC"
	if got := page.Cell("report", browsertest.ColNext); got != "2026-01-01 00:03:00 UTC"+due {
		t.Errorf("next fire %q, want the next fire and the retry due", got)
	}
	if !strings.HasPrefix(r.due.UTC().Format("15:04:05.000"), "00:02:58.112") {
		t.Fatalf("the retry is due at %v, not at the time the test expects", r.due)
	}
	if got := page.Cell("report", browsertest.ColLastRun); !strings.HasPrefix(got, "error on node-a, token 1, attempt 1/2") {
		t.Errorf("last run %q, want the failed first attempt of 2", got)
	}
	lastFire := `document.querySelector('#tasks tbody tr[data-task="report"]').cells[7].firstChild`
	if got := browsertest.Eval[string](page, lastFire+`.className + "|" + `+lastFire+`.textContent`); got != "outcome-skipped|skipped: retrying" {
		t.Errorf("last fire %q, want skipped: retrying, shown as a skip", got)
	}
	rects := `[...document.querySelector('#tasks tbody tr[data-task="report"]').cells[6].querySelectorAll("svg.strip rect")]`
	strip := rects + `.map(r => r.getAttribute("class") + "|" + r.textContent)`
	if got := browsertest.Eval[[]string](page, strip); len(got) != 2 ||
		got[0] != "s-error|error · 2026-01-01 00:01:00 UTC · node-a · attempt 1/2 · ledger locked" ||
		got[1] != "s-skipped|skipped: retrying · 2026-01-01 00:02:00 UTC · node-a" {
		t.Errorf("strip %q, want the failed attempt 1/2, then the skip", got)
	}
	page.WaitFor("the task's page to say how it retries", `document.getElementById("task-retry").textContent.includes("A retry is due")`)
	if got := browsertest.Eval[string](page, `document.getElementById("task-retry").textContent`); got != "Retries a failed run once (2 attempts per fire), "+
		"each retry after a random delay below 2m0s, doubling for each next one up to 3h20m0s; fires due while a retry is pending are skipped "+
		"(skipped: retrying). A retry is due at 2026-01-01 00:02:58.112 UTC." {
		t.Errorf("the task's page says %q", got)
	}
	runs := `[...document.querySelectorAll("#runs tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	page.WaitFor("the two fires recorded", runs+`.length === 2`)
	want := []string{
		"2026-01-01 00:02:00 UTC|scheduled|-|node-a|-|-|-|skipped: retrying|-",
		"2026-01-01 00:01:00 UTC|scheduled|1/2|node-a|1|2026-01-01 00:01:00 UTC|0 s|error|ledger locked",
	}
	if got := browsertest.Eval[[]string](page, runs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("runs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := browsertest.Eval[string](page, `document.querySelector("#runs tbody tr").cells[7].className`); got != "outcome-skipped" {
		t.Errorf("the skip's outcome cell has class %q, want outcome-skipped", got)
	}

	// The page refreshes every 2s: it comes to the retry's run.
	r.step(t, retriedStage)
	page.WaitFor("the retry in the runs table", runs+`.length === 4`)
	got := browsertest.Eval[[]string](page, runs)
	if len(got) != 4 || !strings.HasPrefix(got[0], "2026-01-01 00:03:00 UTC|scheduled|1/2|node-a|3|") ||
		!strings.HasPrefix(got[1], "2026-01-01 00:01:00 UTC|scheduled|2/2|node-a|2|2026-01-01 00:02:5") || !strings.HasSuffix(got[1], "|ok|-") {
		t.Errorf("runs after the retry:\n%s\nwant 00:03, then 00:01's attempt 2/2, ok", strings.Join(got, "\n"))
	}
	page.WaitCell("no retry due", "report", browsertest.ColNext, "2026-01-01 00:04:00 UTC")
	if got := browsertest.Eval[[]string](page, strip); len(got) != 4 || got[1] != "s-ok|ok · 2026-01-01 00:01:00 UTC · node-a · attempt 2/2" {
		t.Errorf("strip %q, want 00:01's attempt 2/2 after its failed attempt 1/2", got)
	}
	page.WaitFor("no retry due on the task's page", `!document.getElementById("task-retry").textContent.includes("A retry is due") && document.getElementById("task-retry").textContent.startsWith("Retries a failed run once")`)
}
