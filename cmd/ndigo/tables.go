package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// none stands in a table cell for a value that does not apply.
const none = "-"

func writeTasks(w io.Writer, tasks []task) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(w, "no scheduled tasks")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tLOCK\tNEXT\tPAUSED\tHEALTH\tLAST FIRE (CLUSTER)\tOUTCOME\tATTEMPT\tNODE\tTOKEN\tLAST FIRE HERE\tRETRY DUE\tFAILURES HERE\tBACKFILL\tHANDLER")
	for _, t := range tasks {
		paused := "unknown" // a handler without the control API
		if t.Paused != nil {
			paused = yesNo(*t.Paused)
		}
		last := []string{none, none, none, none, none}
		if r := t.ClusterLastRun; r != nil {
			last = []string{stamp(&r.Fire), outcomeText(r.Outcome, r.Error), attempt(r.Attempt, t.Retries, r.Start != nil), r.Node, token(r.Token)}
		}
		here := none
		if t.LastFire != nil {
			here = outcomeText(t.LastFire.Outcome, t.LastFire.Error)
		}
		// A completed task has no next fire: NEXT says why.
		next := stamp(t.Next)
		if t.Completed && t.Next == nil {
			next = "completed"
		}
		health := none // a node that predates health states
		if t.Health != nil {
			health = cell(t.Health.State)
		}
		// HANDLER marks a task that runs a stored schedule (ndigo schedules).
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cell(t.Name), cell(t.Cron), cell(t.Lock), next, paused, health,
			strings.Join(cells(last), "\t"), cell(here), stamp(t.RetryAt), t.Failures, backfillCell(t.Backfill), cell(t.Handler))
	}
	return tw.Flush()
}

func writeRuns(w io.Writer, name string, res runs) error {
	if len(res.Runs) == 0 {
		_, err := fmt.Fprintf(w, "no runs of %s recorded\n", strconv.Quote(name))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIRE\tKIND\tATTEMPT\tNODE\tTOKEN\tSTART\tDURATION\tOUTCOME\tERROR")
	for _, r := range res.Runs {
		kind := "scheduled"
		switch {
		case r.Backfill:
			kind = "backfill"
		case r.Manual:
			kind = "manual"
		}
		outcome, errText := r.Outcome, r.Error
		if outcome == outcomeExcluded {
			outcome, errText = outcomeText(r.Outcome, r.Error), ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", stamp(&r.Fire), kind, attempt(r.Attempt, res.Retries, r.Start != nil),
			strings.Join(cells([]string{r.Node, token(r.Token), stamp(r.Start), r.Duration, outcome, errText}), "\t"))
	}
	return tw.Flush()
}

// attempt is the ATTEMPT cell of a fire's attempt k (0 from a node that
// predates retries: 1; 1 for the run of a fire that waited for the run
// before it, which is no retry) of a task that retries a failed run
// retries times:
// "k/n", n being retries+1, for a run of such a task and for any retry;
// just "k" for a retry beyond what the node's task now allows; none for
// the first attempt of a task that does not retry, or one that did not
// run (a skip or a failed lock, which leaves no retry).
func attempt(k, retries int, ran bool) string {
	k = max(k, 1)
	switch {
	case k == 1 && (retries == 0 || !ran):
		return none
	case k > retries+1:
		return strconv.Itoa(k)
	}
	return strconv.Itoa(k) + "/" + strconv.Itoa(retries+1)
}

func writeAudit(w io.Writer, name string, a audit) error {
	if a.From == nil {
		_, err := fmt.Fprintf(w, "nothing to audit for %s yet: no fire recorded, no node started\n", strconv.Quote(name))
		return err
	}
	excluded := ""
	if a.Excluded > 0 {
		excluded = fmt.Sprintf(", %d excluded", a.Excluded)
	}
	fmt.Fprintf(w, "%s from %s to %s: %d ran, %d skipped, %d failed, %d missed%s\n", strconv.Quote(name),
		stamp(a.From), stamp(&a.To), a.Ran, a.Skipped, a.Failed, a.Missed, excluded)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIRE\tSTATUS\tOUTCOME\tNODE\tDETAIL")
	for _, f := range a.Fires {
		outcome, detail := f.Outcome, f.Detail
		if f.Status == outcomeExcluded {
			// "excluded: calendar NAME": never a miss.
			outcome, detail = outcomeText(outcomeExcluded, f.Detail), ""
		}
		fmt.Fprintf(tw, "%s\t%s\n", stamp(&f.Fire), strings.Join(cells([]string{f.Status, outcome, f.Node, detail}), "\t"))
	}
	return tw.Flush()
}

func writeAction(w io.Writer, verb string, a action) error {
	name := strconv.Quote(a.Task)
	var msg string
	switch verb {
	case "run":
		msg = "run of " + name + " requested: one node runs it as soon as it can, under its lock"
	case "pause":
		msg = name + " paused: every node skips its fires until it is resumed"
	default:
		msg = name + " resumed: it runs again from its next fire"
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

// outcomeExcluded is the outcome of a fire that a calendar of the task
// excluded, and the audit status of its instant; the record's error names
// the calendar, "calendar NAME".
const outcomeExcluded = "excluded"

// outcomeText is the OUTCOME cell of a fire's outcome and error: an
// excluded fire reads "excluded: calendar NAME", the others their outcome.
func outcomeText(outcome, err string) string {
	if outcome == outcomeExcluded && err != "" {
		return outcome + ": " + err
	}
	return outcome
}

// stampFormat is RFC 3339 to the millisecond at most: a manual fire's
// nanoseconds would widen every row; --json keeps them.
const stampFormat = "2006-01-02T15:04:05.999Z07:00"

// stamp formats a time in UTC; none for nil.
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return t.UTC().Format(stampFormat)
}

func token(t uint64) string {
	if t == 0 {
		return none
	}
	return strconv.FormatUint(t, 10)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func cells(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = cell(v)
	}
	return out
}

// cell makes v one table cell: control characters (tabs and newlines
// from a task's error would break the table's columns) become spaces, and
// "" becomes none.
func cell(v string) string {
	if v == "" {
		return none
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, v)
}
