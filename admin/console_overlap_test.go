package admin

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ndigo/ndigo/internal/browsertest"
)

// The console shows a task's overlap policy on its page, and a fire that
// waits for the run going: in the task's row, beside the next fire, and on
// its page; the fire buffered and the one skipped while it waits show as
// skips in the row, the strip and the runs table; once the first run
// ended, the waiting fire's run shows as the fire's first attempt (1/3 of
// a task that retries twice), not as a retry, and the waiting goes. A task
// with overlap allow has its maxConcurrent on its page.
func TestConsoleShowsOverlap(t *testing.T) {
	o := newOverlapping(t)
	o.n.StepTo(t, bufferedStage)
	srv := httptest.NewServer(o.h)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/#task=sync")
	const waits = "fire 2026-01-01 00:02:00 UTC waits for the run going"
	if got := page.Cell("sync", browsertest.ColNext); got != "2026-01-01 00:03:00 UTC"+waits {
		t.Errorf("next fire %q, want the next fire and the fire waiting", got)
	}
	lastFire := `document.querySelector('#tasks tbody tr[data-task="sync"]').cells[7].firstChild`
	outcome := browsertest.Eval[string](page, lastFire+`.className + "|" + `+lastFire+`.textContent`)
	if outcome != "outcome-skipped|buffered" {
		t.Errorf("last fire %q, want buffered, shown as a skip", outcome)
	}
	rects := `[...document.querySelector('#tasks tbody tr[data-task="sync"]').cells[6].querySelectorAll("svg.strip rect")]`
	strip := rects + `.map(r => r.getAttribute("class") + "|" + r.textContent)`
	if got := browsertest.Eval[[]string](page, strip); len(got) != 1 || got[0] != "s-skipped|buffered · 2026-01-01 00:02:00 UTC · node-a" {
		t.Errorf("strip %q, want the buffered fire as a skip", got)
	}
	const policy = "Overlap buffer-one: a fire that finds a run of the task going waits (buffered), and runs once that run ends; " +
		"while one waits, a later fire is skipped (skipped: one waiting)."
	overlap := `document.getElementById("task-overlap")`
	page.WaitFor("the task's page to say which fire waits", overlap+`.textContent.includes("waits for the run going.")`)
	if got := browsertest.Eval[string](page, overlap+`.textContent`); got != policy+" Fire 2026-01-01 00:02:00 UTC waits for the run going." {
		t.Errorf("the task's page says %q", got)
	}
	if got := browsertest.Eval[string](page, `document.getElementById("task-retry").textContent`); strings.Contains(got, "retry is due") {
		t.Errorf("the task's page says %q: a waiting fire is no retry", got)
	}

	o.n.StepTo(t, fullStage)
	runs := `[...document.querySelectorAll("#runs tbody tr")].map(r => [...r.cells].map(c => c.className.split(" ")[0] + ":" + c.textContent).join("|"))`
	page.WaitFor("the two fires recorded", runs+`.length === 2`)
	want := []string{
		":2026-01-01 00:03:00 UTC|:scheduled|mono:-|:node-a|mono:-|:-|mono:-|outcome-skipped:skipped: one waiting|:-",
		":2026-01-01 00:02:00 UTC|:scheduled|mono:-|:node-a|mono:-|:-|mono:-|outcome-skipped:buffered|:-",
	}
	if got := browsertest.Eval[[]string](page, runs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("runs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	page.WaitFor("the row to come to 00:03", `(`+lastFire+`.textContent === "skipped: one waiting")`)
	if got := browsertest.Eval[string](page, lastFire+`.className`); got != "outcome-skipped" {
		t.Errorf("last fire's class %q, want outcome-skipped", got)
	}
	if got := page.Cell("sync", browsertest.ColNext); got != "2026-01-01 00:04:00 UTC"+waits {
		t.Errorf("next fire %q, want 00:04 and 00:02 still waiting", got)
	}

	// The page refreshes every 2s: it comes to the waiting fire's run.
	o.release()
	o.n.StepTo(t, ranStage)
	page.WaitFor("the runs after the first ended", runs+`.length === 5`)
	got := browsertest.Eval[[]string](page, runs)
	if len(got) != 5 || !strings.HasPrefix(got[0], ":2026-01-01 00:04:00 UTC|:scheduled|mono:1/3|") ||
		!strings.HasPrefix(got[1], ":2026-01-01 00:02:00 UTC|:scheduled|mono:1/3|:node-a|mono:2|:2026-01-01 00:03:3") || !strings.HasSuffix(got[1], "|outcome-ok:ok|:-") ||
		!strings.HasPrefix(got[2], ":2026-01-01 00:01:00 UTC|:scheduled|mono:1/3|:node-a|mono:1|:2026-01-01 00:01:00 UTC|mono:2 min 30 s|outcome-ok:ok") {
		t.Errorf("runs once the first ended:\n%s\nwant 00:04, then 00:02's run as attempt 1/3, then 00:01's", strings.Join(got, "\n"))
	}
	page.WaitCell("no fire waiting", "sync", browsertest.ColNext, "2026-01-01 00:05:00 UTC")
	if got := browsertest.Eval[[]string](page, strip); len(got) != 5 || got[2] != "s-ok|ok · 2026-01-01 00:02:00 UTC · node-a · attempt 1/3" ||
		got[3] != "s-skipped|skipped: one waiting · 2026-01-01 00:03:00 UTC · node-a" {
		t.Errorf("strip %q, want 00:02's run as attempt 1/3 after its buffered record, then 00:03's skip", got)
	}
	page.WaitFor("no fire waiting on the task's page", overlap+`.textContent === `+browsertest.JS(t, policy))

	browsertest.Eval[string](page, `location.hash = "task=export"`)
	page.WaitFor("export's page", overlap+`.textContent.startsWith("Overlap allow")`)
	if got := browsertest.Eval[string](page, overlap+`.textContent`); got != "Overlap allow: a fire runs beside the runs of the task going, "+
		"up to 3 at once in the cluster (maxConcurrent 3); a fire that finds 3 going is skipped (skipped: lock held)." {
		t.Errorf("export's page says %q", got)
	}
	browsertest.Eval[string](page, `location.hash = "task=plain"`)
	page.WaitFor("plain's page", overlap+`.textContent.startsWith("Overlap skip (the default)")`)
}
