package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// calendarRows is the JavaScript expression of the console's calendars, a
// row each: the name, then the text of the rules, used by, note, updated,
// in force from and "on this node" cells, "|" between.
const calendarRows = `[...document.querySelectorAll("#calendars tbody tr")].map(r => r.dataset.calendar + ":" +
	[...r.cells].slice(1, 7).map(c => c.textContent).join("|"))`

// calendarResult is the JavaScript expression of the line under the
// calendar form.
const calendarResult = `document.getElementById("calendar-result")`

// wantCalendarResult waits for the line under the calendar form to start
// with prefix, and checks that it is want, as an error or not.
func wantCalendarResult(t *testing.T, page *browsertest.Console, prefix, want string, isError bool) {
	t.Helper()
	page.WaitFor("the calendar form's result "+prefix, `!`+calendarResult+`.hidden && `+calendarResult+`.textContent.startsWith(`+browsertest.JS(t, prefix)+`)`)
	got := browsertest.Eval[string](page, calendarResult+`.textContent`)
	gotError := browsertest.Eval[bool](page, calendarResult+`.classList.contains("error")`)
	if got != want || gotError != isError {
		t.Errorf("the calendar form says\n%q (as an error: %v)\nwant\n%q (%v)", got, gotError, want, isError)
	}
}

// color is the JavaScript expression of the computed colour (fill, for an
// SVG shape) of the element that sel selects.
func color(t *testing.T, sel, prop string) string {
	return `getComputedStyle(document.querySelector(` + browsertest.JS(t, sel) + `)).` + prop
}

// nightlyNode is a started node with a task state and a locked task,
// "nightly", @daily.
func nightlyNode(t *testing.T) *fakenode.Node {
	t.Helper()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a", State: store, Location: time.UTC})
	n.Start(t, scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.Name("nightly")))
	return n
}

// nightlyConsole serves n's console, with the token secret, and opens it.
func nightlyConsole(t *testing.T, n *fakenode.Node) (*Handler, *browsertest.Console) {
	t.Helper()
	h, err := New(Options{Scheduler: n.S, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/")
}

// The console's Calendars panel lists the calendars, and its form refuses
// a bad rule with the API's message, then creates one; a stored schedule
// that names it shows in its Used by. The task's page previews its next
// fires, the ones the calendar excludes marked so; once they passed, the
// fire strip, the runs and the audit label each excluded fire "excluded:
// calendar NAME" in a colour of its own, neither the red of a miss nor the
// grey of a pending instant, and the audit counts them apart. A one-off
// task past its instant shows completed, in the colour of a state, not of
// an error. Edit updates the calendar; a delete while a task names it
// shows the refusal naming the task.
func TestConsoleCalendars(t *testing.T) {
	ctx := context.Background()
	n := nightlyNode(t)
	if err := n.S.Handle("sweep", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h, page := nightlyConsole(t, n)
	page.WaitFor("the empty calendars panel", `!document.getElementById("calendars-empty").hidden`)

	// A bad weekday: the API's message shows under the form, naming the
	// field, the value and the rule.
	typeInto(t, page, [2]string{"calendar-name", "maintenance"}, [2]string{"calendar-windows", "00:02-00:04"},
		[2]string{"calendar-weekdays", "sundy"}, [2]string{"calendar-note", "the nightly window"})
	wantBad := apiError(t, h, "create calendar maintenance", "POST", "/calendars",
		`{"name":"maintenance","weekdays":["sundy"],"windows":["00:02-00:04"],"note":"the nightly window"}`)
	if !strings.Contains(wantBad, `weekdays[0] "sundy"`) {
		t.Fatalf("the API's refusal %q does not name the field and its value", wantBad)
	}
	page.Do("creating", chromedp.Click(chromedp.ID("calendar-submit")))
	answerToken(page, secret)
	wantCalendarResult(t, page, "create calendar maintenance: ", wantBad, true)
	typeInto(t, page, [2]string{"calendar-weekdays", ""})
	page.Do("creating", chromedp.Click(chromedp.ID("calendar-submit")))
	wantCalendarResult(t, page, "Calendar maintenance created", "Calendar maintenance created: the tasks that name it skip the fires it excludes, "+
		"on this node now, on the others from their next poll.", false)
	cals, err := n.S.Calendars(ctx)
	if err != nil || len(cals) != 1 || cals[0].Name != "maintenance" || !slices.Equal(cals[0].Windows, []string{"00:02-00:04"}) ||
		len(cals[0].Weekdays) != 0 || cals[0].Note != "the nightly window" {
		t.Fatalf("calendars after the create: %+v, %v", cals, err)
	}
	page.WaitFor("the calendar listed", calendarRows+`.length === 1`)
	want := "maintenance:windows: 00:02-00:04|-|the nightly window|2026-01-01 00:00:00 UTC by node-a|2026-01-01 00:00:00 UTC|applied"
	if got := browsertest.Eval[[]string](page, calendarRows); len(got) != 1 || got[0] != want {
		t.Errorf("calendars %q, want %q", got, want)
	}

	// Stored schedules, the node's tasks at once: one naming the
	// calendar, one that fires once.
	for _, sc := range []taskstate.Schedule{
		{Name: "sweep", Handler: "sweep", Cron: "@every 1m", Lock: "sweep", Options: map[string]string{"calendar": "maintenance"}},
		{Name: "once", Handler: "sweep", Cron: "@at 2026-01-01T00:00:30Z"},
	} {
		if err := n.S.CreateSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	page.WaitFor("sweep in the calendar's Used by", calendarRows+`[0].split("|")[1] === "task sweep"`)

	// The task's page previews the next fires: 00:02 and 00:03 excluded.
	page.Do("opening sweep", chromedp.Click(chromedp.CSS(`#tasks tbody tr[data-task="sweep"] button.link`)))
	next := `[...document.querySelectorAll("#next tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	page.WaitFor("the next fires", next+`.length === 10`)
	got := browsertest.Eval[[]string](page, next)
	if got[0] != "2026-01-01 00:01:00 UTC|2026-01-01 00:01:00 UTC|-" || got[1] != "2026-01-01 00:02:00 UTC|2026-01-01 00:02:00 UTC|excluded: calendar maintenance" ||
		got[2] != "2026-01-01 00:03:00 UTC|2026-01-01 00:03:00 UTC|excluded: calendar maintenance" || got[3] != "2026-01-01 00:04:00 UTC|2026-01-01 00:04:00 UTC|-" {
		t.Errorf("next fires:\n%s", strings.Join(got, "\n"))
	}
	if got := browsertest.Eval[string](page, `document.getElementById("task-bounds").textContent`); got != "Its fires skip what the calendars maintenance exclude (Calendars, below)." {
		t.Errorf("sweep's page says %q about its calendar", got)
	}
	const excludedColor = "rgb(109, 40, 217)"
	if got := browsertest.Eval[string](page, color(t, "#next tbody tr:nth-child(2) td:nth-child(3) span", "color")); got != excludedColor {
		t.Errorf("an excluded next fire's note is %s, want the excluded colour %s", got, excludedColor)
	}

	n.StepTo(t, 8*time.Minute)
	runs := `[...document.querySelectorAll("#runs tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	page.WaitFor("the fires to 00:08", runs+`.length === 8`)
	var excluded []string
	for _, r := range browsertest.Eval[[]string](page, runs) {
		if strings.Contains(r, "excluded") {
			excluded = append(excluded, r)
		}
	}
	if !slices.Equal(excluded, []string{"2026-01-01 00:03:00 UTC|scheduled|-|node-a|-|-|-|excluded: calendar maintenance|-",
		"2026-01-01 00:02:00 UTC|scheduled|-|node-a|-|-|-|excluded: calendar maintenance|-"}) {
		t.Errorf("the runs table's excluded fires:\n%s", strings.Join(excluded, "\n"))
	}
	rects := `[...document.querySelector('#tasks tbody tr[data-task="sweep"]').cells[6].querySelectorAll("svg.strip rect")]`
	strip := browsertest.Eval[[]string](page, rects+`.map(r => r.getAttribute("class") + "|" + r.textContent)`)
	if len(strip) != 8 || strip[1] != "s-excluded|excluded: calendar maintenance · 2026-01-01 00:02:00 UTC · node-a" ||
		strip[2] != "s-excluded|excluded: calendar maintenance · 2026-01-01 00:03:00 UTC · node-a" || strip[3] != "s-ok|ok · 2026-01-01 00:04:00 UTC · node-a" {
		t.Errorf("the fire strip %q, want 00:02 and 00:03 excluded by maintenance", strip)
	}
	// Neither a miss's red (--bad) nor a pending instant's pale grey (--line).
	fill := browsertest.Eval[string](page, `getComputedStyle(`+rects+`[1]).fill`)
	if fill != excludedColor || fill == "rgb(185, 28, 28)" || fill == "rgb(209, 213, 219)" {
		t.Errorf("an excluded fire is drawn %s, want %s", fill, excludedColor)
	}
	audit := `[...document.querySelectorAll("#audit tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	page.WaitFor("the audit's excluded instants", audit+`.length === 2`)
	if got := browsertest.Eval[[]string](page, audit); !slices.Equal(got, []string{
		"2026-01-01 00:03:00 UTC|excluded|excluded: calendar maintenance|node-a|-",
		"2026-01-01 00:02:00 UTC|excluded|excluded: calendar maintenance|node-a|-",
	}) {
		t.Errorf("audit rows:\n%s", strings.Join(got, "\n"))
	}
	if got := browsertest.Eval[string](page, color(t, "#audit tbody tr td:nth-child(2)", "color")); got != excludedColor {
		t.Errorf("an excluded instant's status is %s, want %s", got, excludedColor)
	}
	if got := browsertest.Eval[string](page, `document.getElementById("audit-summary").textContent`); !strings.Contains(got, "0 missed · 2 excluded by calendars") {
		t.Errorf("the audit summary %q, want 2 excluded and none missed", got)
	}

	// once is past its instant: completed, in the colour of a state.
	page.WaitCell("once completed", "once", browsertest.ColNext, "completed")
	if got := browsertest.Eval[string](page, page.CellExpr("once", browsertest.ColNext)+` && document.querySelector('#tasks tbody tr[data-task="once"]').cells[3].className`); got != "completed" {
		t.Errorf("once's next cell has class %q, want completed", got)
	}
	page.Do("opening once", chromedp.Click(chromedp.CSS(`#tasks tbody tr[data-task="once"] button.link`)))
	page.WaitFor("once's page says it is completed", `document.getElementById("task-completed").textContent.startsWith("Completed: once fires no more")`)
	page.WaitFor("no next fire", `document.getElementById("next-message").textContent === "No next fire: the task fires no more."`)

	// Edit fills the form; Save replaces the calendar.
	page.Do("editing maintenance", chromedp.Click(chromedp.CSS(`#calendars tbody tr[data-calendar="maintenance"] button[data-action="edit"]`)))
	form := `["calendar-form-title", "calendar-name", "calendar-windows", "calendar-note", "calendar-submit"].
		map(id => { const e = document.getElementById(id); return e.tagName === "INPUT" || e.tagName === "TEXTAREA" ? e.value : e.textContent }).join("|")`
	if got := browsertest.Eval[string](page, form); got != "Edit calendar maintenance|maintenance|00:02-00:04|the nightly window|Save" {
		t.Errorf("the form to edit maintenance: %q", got)
	}
	typeInto(t, page, [2]string{"calendar-windows", "00:20-00:30"}, [2]string{"calendar-weekdays", "sun"})
	page.Do("saving", chromedp.Click(chromedp.ID("calendar-submit")))
	page.WaitFor("the update's result", calendarResult+`.textContent.startsWith("Calendar maintenance updated: every node judges the fires by its new rules from ")`)
	if cals, _ := n.S.Calendars(ctx); len(cals) != 1 || !slices.Equal(cals[0].Windows, []string{"00:20-00:30"}) || !slices.Equal(cals[0].Weekdays, []string{"sun"}) {
		t.Errorf("maintenance after the edit: %+v", cals)
	}
	page.WaitFor("the new rules listed", calendarRows+`[0].startsWith("maintenance:weekdays: sun\nwindows: 00:20-00:30|task sweep|")`)

	// A delete while sweep names it: refused, naming sweep.
	page.Do("deleting maintenance", chromedp.Click(chromedp.CSS(`#calendars tbody tr[data-calendar="maintenance"] button[data-action="delete"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	wantCalendarResult(t, page, "delete calendar maintenance: ", `delete calendar maintenance: 409 Conflict: scheduling: the calendar is in use: `+
		`calendar "maintenance" is named by task sweep; remove it from them first`, true)
	if n := browsertest.Eval[int](page, `document.querySelectorAll("#calendars-panel img").length`); n != 0 {
		t.Errorf("markup in the calendars panel: %d", n)
	}
}

// A pause's note, and who made it, show in the task's Paused cell.
func TestConsolePauseNote(t *testing.T) {
	n := nightlyNode(t)
	if err := n.S.Pause(context.Background(), "nightly", scheduling.WithNote("ledger migration\nback at 14:00"), scheduling.By("ops")); err != nil {
		t.Fatal(err)
	}
	_, page := nightlyConsole(t, n)
	page.WaitFor("the pause's note", `[...document.querySelectorAll(".pause-note")].some(e => e.textContent === "paused by ops: ledger migration\nback at 14:00")`)
}
