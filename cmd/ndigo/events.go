package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// eventsFlags are events' own flags besides -n.
var eventsFlags = []string{"n", "after"}

// event is one control action of GET /events.
type event struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	Node   string    `json:"node"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Note   string    `json:"note"`
}

// eventList is the body of GET /events.
type eventList struct {
	Events []event `json:"events"`
	Last   int64   `json:"last"`
}

func checkEvents(_ []string, f *cmdFlags) error {
	switch {
	case f.set["n"] && (f.n < 1 || f.n > 1000):
		return fmt.Errorf("events: -n %d: must be from 1 to 1000, the events to list (100 without it)", f.n)
	case f.after < 0:
		return fmt.Errorf("events: --after %d: must be a SEQ, from 0 (the events after it)", f.after)
	}
	return nil
}

func listEvents(ctx context.Context, c *client, _ []string, f cmdFlags, out output) error {
	q := url.Values{}
	if f.after > 0 {
		q.Set("after", strconv.FormatInt(f.after, 10))
	}
	if f.set["n"] {
		q.Set("limit", strconv.Itoa(f.n))
	}
	u := c.base.JoinPath("events").String()
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var res eventList
	if printed, err := getJSON(ctx, c, u, out, "the trail of control actions", &res); printed || err != nil {
		return err
	}
	return writeEvents(out.w, res)
}

// noteWidth is how many characters of a note the NOTE cell shows; --json
// shows it whole.
const noteWidth = 60

func writeEvents(w io.Writer, res eventList) error {
	if len(res.Events) == 0 {
		_, err := fmt.Fprintln(w, "no control actions kept after", res.Last)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tACTOR\tACTION\tTARGET\tNODE\tNOTE")
	for _, e := range res.Events {
		note := strings.ReplaceAll(e.Note, "\n", " ")
		if utf8.RuneCountInString(note) > noteWidth {
			note = string([]rune(note)[:noteWidth-3]) + "..."
		}
		at := e.At
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, stamp(&at), cell(e.Actor), e.Action, cell(e.Target), cell(e.Node), cell(note))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "the next events: ndigo events --after %d\n", res.Last)
	return err
}
