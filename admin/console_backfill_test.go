package admin

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// colBackfill is the tasks table's Backfill column, after the last fire
// on this node.
const colBackfill = browsertest.ColLastFire + 1

// The console shows a running backfill in its task's row, its state and
// counts, a progress bar of (taken+refused)/total, its range and a "Cancel
// backfill" button, and on the task's page; the button, with the token,
// cancels it in the store; the row then shows it cancelled, without the
// button, and the history marks the backfill's run. A task without a
// backfill shows none.
func TestConsoleShowsAndCancelsABackfill(t *testing.T) {
	b := newBackfilling(t)
	in := b.Instants
	started, err := b.S.Backfill(context.Background(), "report", in[0], in[9], scheduling.BackfillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first instant ran already (node-b's run): refused, under the
	// lock's token 1; the second's run, under token 2, blocks.
	b.StepTo(t, 3*time.Second)
	srv := httptest.NewServer(b.h)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/#task=report")

	status := `document.querySelector('#tasks tbody tr[data-task="report"]').cells[8].querySelector(".backfill-status")`
	const rangeText = "from 2025-12-31 14:00:00 UTC to 2025-12-31 23:00:00 UTC"
	if got := browsertest.Eval[string](page, status+`.textContent`); got != "running 2/10 · 1 taken · 1 refused"+rangeText {
		t.Errorf("report's backfill cell %q, want it running at 2/10 with its counts and range", got)
	}
	bar := status + `.querySelector("progress")`
	if got := browsertest.Eval[[]float64](page, `[`+bar+`.value, `+bar+`.max]`); len(got) != 2 || got[0] != 2 || got[1] != 10 {
		t.Errorf("the progress bar is at %v, want 2 of 10", got)
	}
	cancel := `document.querySelector('#tasks tbody tr[data-task="report"] button[data-action="cancel-backfill"]')`
	if got := browsertest.Eval[string](page, cancel+`.textContent + "|" + `+cancel+`.hidden`); got != "Cancel backfill|false" {
		t.Errorf("the cancel button: %q, want it shown", got)
	}
	if got := page.Cell("plain", colBackfill); got != "-Cancel backfill" || browsertest.Eval[bool](page,
		`!document.querySelector('#tasks tbody tr[data-task="plain"] button[data-action="cancel-backfill"]').hidden`) {
		t.Errorf("plain's backfill cell %q, want none and no cancel shown", got)
	}
	detail := `document.getElementById("task-backfill")`
	page.WaitFor("the task's page to show its backfill", `!`+detail+`.hidden && `+detail+`.querySelector("progress") !== null`)
	if got, want := browsertest.Eval[string](page, detail+`.textContent`), "Backfill "+started.ID+" running: 2 of 10 instants of the schedule "+
		rangeText+", 1 taken to run, 1 refused as already run; the last at 2025-12-31 15:00:00 UTC. "+
		"Started by node-a at 2026-01-01 00:00:00 UTC, overlap the task's own."; got != want {
		t.Errorf("the task's page says\n%q\nwant\n%q", got, want)
	}

	page.Act("report", "cancel-backfill", secret)
	wantMessage(t, page, "Backfill of report cancelled: no node takes its next instant; a run of it in flight finishes.", false)
	if got, _ := b.stored(t); got.ID != started.ID || got.State != taskstate.BackfillCancelled || got.Taken != 1 || got.Refused != 1 {
		t.Fatalf("the store's backfill after the click: %+v, want %s cancelled, 1 taken, 1 refused", got, started.ID)
	}

	// The run in flight finishes; the node's next poll reads the cancel.
	b.Gate.Open()
	b.StepTo(t, 6*time.Second)
	page.WaitFor("the row to show the backfill cancelled", status+`.textContent === `+browsertest.JS(t, "cancelled 2/10 · 1 taken · 1 refused"+rangeText))
	if got := browsertest.Eval[string](page, status+`.firstChild.className + "|" + (`+bar+` === null) + "|" + `+cancel+`.hidden`); got != "backfill-cancelled|true|true" {
		t.Errorf("the cancelled backfill: %q, want it marked cancelled, no progress bar, no cancel button", got)
	}
	page.WaitFor("the task's page to show it cancelled", detail+`.textContent.startsWith(`+browsertest.JS(t, "Backfill "+started.ID+" cancelled: 2 of 10")+`)`)
	runs := `[...document.querySelectorAll("#runs tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	page.WaitFor("the backfill's run in the history", runs+`.length === 2`)
	got := browsertest.Eval[[]string](page, runs)
	if len(got) != 2 || !strings.HasPrefix(got[0], "2025-12-31 15:00:00 UTC|backfill|-|node-a|2|2026-01-01 00:00:00 UTC|") || !strings.HasSuffix(got[0], "|ok|-") ||
		got[1] != "2025-12-31 14:00:00 UTC|scheduled|-|node-b|1|2025-12-31 14:00:00 UTC|0 s|ok|-" {
		t.Errorf("runs\n%s\nwant the backfill's run of 15:00, then node-b's of 14:00", strings.Join(got, "\n"))
	}
	if got := page.Cell("report", browsertest.ColLastRun); !strings.HasPrefix(got, "ok on node-a, token 2, backfill2025-12-31 15:00:00 UTC") {
		t.Errorf("report's last run %q, want the backfill's run", got)
	}
	strip := `[...document.querySelector('#tasks tbody tr[data-task="report"]').cells[6].querySelectorAll("svg.strip rect")].map(r => r.textContent)`
	if got := browsertest.Eval[[]string](page, strip); len(got) != 2 || got[1] != "ok · 2025-12-31 15:00:00 UTC · node-a · backfill" {
		t.Errorf("strip %q, want the backfill's run marked", got)
	}
}
