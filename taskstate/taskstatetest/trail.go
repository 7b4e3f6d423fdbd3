package taskstatetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// Trail is how many events the stores of a harness should keep (their
// trail option): the Trail cases append past it, and append at most
// Trail/2 in any other case. A harness that cannot set it says so in
// Stores.Trail.
const Trail = 100

// trailOf returns the trail length the stores keep.
func trailOf(st Stores) int {
	if st.Trail == 0 {
		return taskstate.DefaultTrail
	}
	return st.Trail
}

// eventAt is an At of an event: with nanoseconds, in a zone other than
// UTC, which a store keeps as the same instant in UTC.
func eventAt(i int) time.Time {
	return time.Date(2026, 3, 2, 8, 0, 0, 987654321, time.FixedZone("CET", 3600)).Add(time.Duration(i) * time.Second)
}

// event returns the i-th event of a case, its Key made of prefix.
func event(prefix string, i int) taskstate.Event {
	return taskstate.Event{Key: fmt.Sprintf("%s:%d", prefix, i), At: eventAt(i), Node: "node-a", Actor: "alice",
		Action: "pause", Target: "Payroll.Close", Note: "the bank's file is late:\r\nwait ⏳",
		Before: `{"paused": false}`, After: `{"paused":true,"by":"alice"}`}
}

// sameEvent reports whether got is want as a store keeps it, of Seq seq.
func sameEvent(got, want taskstate.Event, seq int64) bool {
	return got.Seq == seq && got.Key == want.Key && got.At.Equal(want.At) && got.At.Location() == time.UTC &&
		got.Node == want.Node && got.Actor == want.Actor && got.Action == want.Action && got.Target == want.Target &&
		got.Note == want.Note && got.Before == want.Before && got.After == want.After
}

// trailAll returns every entry of st's trail after after, reading it in
// pages of limit, checking the order.
func trailAll(t *testing.T, st taskstate.Store, after int64, limit int) []taskstate.Event {
	t.Helper()
	var out []taskstate.Event
	for {
		page, err := st.Events(context.Background(), after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > limit {
			t.Fatalf("Events(%d, limit %d) returned %d entries", after, limit, len(page))
		}
		for _, e := range page {
			if e.Seq <= after {
				t.Fatalf("Events(after %d) returned an entry of Seq %d, not above after and the entries before it: %+v", after, e.Seq, e)
			}
			after = e.Seq
		}
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
	}
}

// tail returns the Seq of the newest entry of st's trail (0 if none): a
// case's entries come after it, the backend being shared.
func tail(t *testing.T, st taskstate.Store) int64 {
	t.Helper()
	all := trailAll(t, st, 0, taskstate.MaxEventsLimit)
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Seq
}

// append fails t unless st's AppendEvent of e answers e as stored, of a
// Seq above after (seq 0) or seq, and returns it.
func appendEvent(t *testing.T, st taskstate.Store, e taskstate.Event, after, seq int64) taskstate.Event {
	t.Helper()
	got, err := st.AppendEvent(context.Background(), e)
	if err != nil {
		t.Fatalf("AppendEvent(%+v): %v", e, err)
	}
	if (seq == 0 && got.Seq <= after) || (seq != 0 && got.Seq != seq) || !sameEvent(got, e, got.Seq) {
		t.Fatalf("AppendEvent(%+v) = %+v; want it as stored (At in UTC), of Seq %d (0: above %d)", e, got, seq, after)
	}
	return got
}

// wantTrail fails t unless the trail of every store after after is want,
// in order, read whole and in pages of 2.
func wantTrail(t *testing.T, after int64, want []taskstate.Event, stores ...taskstate.Store) {
	t.Helper()
	for _, st := range stores {
		for _, limit := range []int{taskstate.MaxEventsLimit, 2} {
			got := trailAll(t, st, after, limit)
			ok := len(got) == len(want)
			for i := 0; ok && i < len(got); i++ {
				ok = sameEvent(got[i], want[i], want[i].Seq)
			}
			if !ok {
				t.Fatalf("Events(after %d, limit %d) = %+v\nwant %+v", after, limit, got, want)
			}
		}
	}
}

// trail: appends from either node are numbered in order, kept whole (the
// longest fields, multi-byte, line breaks, JSON as it was sent) and read
// from either, oldest first, from any point and in pages; an append of a
// Key the trail holds, whatever its other fields, stores nothing and
// answers the entry stored.
func (s *suite) trail(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	start := tail(t, a)
	prefix := s.task(t)
	long := event(prefix, 2)
	long.Key = prefix + strings.Repeat("k", taskstate.MaxEventLabelLen-len(prefix))
	long.Actor = strings.Repeat("é", taskstate.MaxEventLabelLen/2)
	long.Action, long.Target, long.Node = "update-schedule", strings.Repeat("t", taskstate.MaxEventLabelLen), strings.Repeat("n", taskstate.MaxEventLabelLen)
	long.Note = strings.Repeat("é<&>\"\r\n", taskstate.MaxNoteLen/10)
	long.Note += strings.Repeat("x", taskstate.MaxNoteLen-len(long.Note))
	body := `{ "args": "` + strings.Repeat("€", (taskstate.MaxEventValueLen-20)/3) + `" }`
	long.Before, long.After = body+strings.Repeat(" ", taskstate.MaxEventValueLen-len(body)), ""
	bare := taskstate.Event{Key: prefix + ":bare", At: time.Unix(0, 1), Action: "notify"}

	e1 := appendEvent(t, a, event(prefix, 1), start, 0)
	e2 := appendEvent(t, b, long, e1.Seq, 0)
	e3 := appendEvent(t, a, bare, e2.Seq, 0)
	want := []taskstate.Event{e1, e2, e3}
	wantTrail(t, start, want, a, b)
	wantTrail(t, e1.Seq, want[1:], a, b)
	wantTrail(t, e3.Seq, nil, a, b)
	if got, err := b.Events(ctx, start, 2); err != nil || len(got) != 2 || !sameEvent(got[1], e2, e2.Seq) {
		t.Fatalf("Events(after %d, limit 2) = %+v, %v; want the first two", start, got, err)
	}

	// A Key held: the entry stored, nothing new.
	again := event(prefix, 9)
	again.Key, again.Actor, again.Note = e1.Key, "mallory", "other"
	appendEvent(t, b, e1, 0, e1.Seq)
	if got, err := a.AppendEvent(ctx, again); err != nil || !sameEvent(got, e1, e1.Seq) {
		t.Fatalf("AppendEvent of a Key held, other fields = %+v, %v; want the entry stored %+v", got, err, e1)
	}
	appendEvent(t, a, long, 0, e2.Seq)
	wantTrail(t, start, want, a, b)
	e4 := appendEvent(t, b, event(prefix, 4), e3.Seq, 0)
	wantTrail(t, start, append(want, e4), a, b)
}

// trailRace: appenders on both nodes, each Key sent by two of them at
// once, with a reader tailing the trail all along: each Key is stored
// once, both its senders answered its Seq, the Seqs are unique, and the
// reader, reading after the last Seq it read, saw every entry once, in
// the trail's order (no entry appeared below a Seq already read).
func (s *suite) trailRace(t *testing.T) {
	const appenders, each = 4, 10 // Trail/2 entries
	a, b := s.pair(t, 0)
	ctx := context.Background()
	start := tail(t, a)
	prefix := s.task(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]map[int64]int{}
	for i := range appenders {
		for _, st := range []taskstate.Store{a, b} {
			wg.Go(func() {
				for j := range each {
					e := event(prefix, i*each+j)
					got, err := st.AppendEvent(ctx, e)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if answers[e.Key] == nil {
						answers[e.Key] = map[int64]int{}
					}
					answers[e.Key][got.Seq]++
					mu.Unlock()
				}
			})
		}
	}
	stop := make(chan struct{})
	var read []taskstate.Event
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		after := start
		last := false
		for {
			select {
			case <-stop:
				last = true
			default:
			}
			page, err := []taskstate.Store{a, b}[len(read)%2].Events(ctx, after, 7)
			if err != nil {
				t.Error(err)
				return
			}
			for _, e := range page {
				if e.Seq <= after {
					t.Errorf("tailing reader: Events(after %d) gave Seq %d", after, e.Seq)
					return
				}
				after = e.Seq
			}
			read = append(read, page...)
			if last && len(page) < 7 {
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readerDone
	if t.Failed() {
		t.FailNow()
	}
	all := trailAll(t, b, start, taskstate.MaxEventsLimit)
	if len(all) != appenders*each {
		t.Fatalf("%d appends of %d Keys, each by two racers: the trail has %d entries after them; want %d", 2*appenders*each, appenders*each, len(all), appenders*each)
	}
	for _, e := range all {
		if got := answers[e.Key]; len(got) != 1 || got[e.Seq] != 2 {
			t.Fatalf("the two appends of Key %q answered Seqs %v; want both %d, the entry's", e.Key, got, e.Seq)
		}
	}
	if len(read) != len(all) {
		t.Fatalf("the tailing reader read %d entries; want %d, each once (it missed one committed below a Seq it had read)", len(read), len(all))
	}
	for i := range read {
		if read[i].Seq != all[i].Seq || read[i].Key != all[i].Key {
			t.Fatalf("the tailing reader's entry %d = Seq %d %q; the trail's, Seq %d %q", i, read[i].Seq, read[i].Key, all[i].Seq, all[i].Key)
		}
	}
}

// trailBound: the stores keep the newest Stores.Trail entries: past it,
// the oldest are dropped, whichever node appended them.
func (s *suite) trailBound(t *testing.T) {
	st := s.stores(t, 0)
	keep := trailOf(st)
	if keep > 10*Trail {
		t.Skipf("the stores keep %d events: too many to append past in a test (a harness sets Stores.Trail)", keep)
	}
	prefix := s.task(t)
	var want []taskstate.Event
	last := tail(t, st.A)
	for i := range keep + 7 {
		e := appendEvent(t, []taskstate.Store{st.A, st.B}[i%2], event(prefix, i), last, 0)
		last = e.Seq
		want = append(want, e)
	}
	wantTrail(t, 0, want[7:], st.A, st.B)
}

// badEvents: an AppendEvent that CheckEvent refuses, an Events out of
// range, is an error wrapping ErrInvalid, naming the field, and appends
// nothing.
func (s *suite) badEvents(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	start := tail(t, a)
	prefix := s.task(t)
	ok := event(prefix, 1)
	with := func(f func(e *taskstate.Event)) taskstate.Event {
		e := ok
		f(&e)
		return e
	}
	for _, c := range []struct {
		name string
		e    taskstate.Event
		want string
	}{
		{"no key", with(func(e *taskstate.Event) { e.Key = "" }), "key"},
		{"no action", with(func(e *taskstate.Event) { e.Action = "" }), "action"},
		{"a key too long", with(func(e *taskstate.Event) { e.Key = strings.Repeat("k", taskstate.MaxEventLabelLen+1) }), "key"},
		{"a key of a line break", with(func(e *taskstate.Event) { e.Key += "\n" }), "key"},
		{"an actor of a control character", with(func(e *taskstate.Event) { e.Actor = "al\aice" }), "actor"},
		{"a target of invalid UTF-8", with(func(e *taskstate.Event) { e.Target = "bad\xff" }), "target"},
		{"a node too long", with(func(e *taskstate.Event) { e.Node = strings.Repeat("n", taskstate.MaxEventLabelLen+1) }), "node"},
		{"a note too long", with(func(e *taskstate.Event) { e.Note = strings.Repeat("x", taskstate.MaxNoteLen+1) }), "note"},
		{"a note of a tab", with(func(e *taskstate.Event) { e.Note = "a\tb" }), "note"},
		{"a before too long", with(func(e *taskstate.Event) { e.Before = `"` + strings.Repeat("x", taskstate.MaxEventValueLen) + `"` }), "before"},
		{"an after not JSON", with(func(e *taskstate.Event) { e.After = "{paused" }), "after"},
		{"no at", with(func(e *taskstate.Event) { e.At = time.Time{} }), "at"},
	} {
		got, err := a.AppendEvent(ctx, c.e)
		if !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), "event "+c.want) || got != (taskstate.Event{}) {
			t.Errorf("AppendEvent of %s = %+v, %v; want the zero Event and taskstate.ErrInvalid naming %q", c.name, got, err, "event "+c.want)
		}
	}
	for _, c := range []struct {
		after int64
		limit int
		want  string
	}{{-1, 1, "after -1"}, {0, 0, "limit 0"}, {0, taskstate.MaxEventsLimit + 1, fmt.Sprintf("limit %d", taskstate.MaxEventsLimit+1)}} {
		if got, err := b.Events(ctx, c.after, c.limit); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), c.want) || got != nil {
			t.Errorf("Events(%d, %d) = %v, %v; want taskstate.ErrInvalid naming %q", c.after, c.limit, got, err, c.want)
		}
	}
	wantTrail(t, start, nil, a, b)
}

// lostAppendEvent: an AppendEvent whose reply was lost, another node's
// append after it, then the resend (the client's for Retried, the
// caller's, of the same Key, for Failed): the call answers the entry its
// first attempt stored, and the trail holds each once, in order.
func (s *suite) lostAppendEvent(t *testing.T) {
	st := s.lossy(t)
	ctx := context.Background()
	start := tail(t, st.B)
	prefix := s.task(t)
	var got taskstate.Event
	var other taskstate.Event
	lose(t, st, "AppendEvent", func() error {
		var err error
		got, err = st.A.AppendEvent(ctx, event(prefix, 1))
		return err
	}, func() {
		var err error
		if other, err = st.B.AppendEvent(ctx, event(prefix, 2)); err != nil {
			t.Error(err)
		}
	})
	all := trailAll(t, st.B, start, taskstate.MaxEventsLimit)
	if len(all) != 2 || all[0].Key != event(prefix, 1).Key {
		t.Fatalf("the trail after the lost reply = %+v; want the lost call's entry, then the other node's", all)
	}
	first := all[0]
	if st.Loss != Failed && !sameEvent(got, event(prefix, 1), first.Seq) {
		t.Fatalf("AppendEvent whose reply was lost = %+v; want the entry its first attempt stored, %+v", got, first)
	}
	resend(t, st, "AppendEvent", func() error {
		got, err := st.A.AppendEvent(ctx, event(prefix, 1))
		if err == nil && !sameEvent(got, event(prefix, 1), first.Seq) {
			err = fmt.Errorf("answered %+v, want the entry stored, of Seq %d", got, first.Seq)
		}
		return err
	})
	wantTrail(t, start, []taskstate.Event{first, other}, st.A, st.B)
}

// contextEndedAppendEvent: an AppendEvent whose context ended after the
// backend applied it: the entry is in the trail once, and the caller's
// resend answers it.
func (s *suite) contextEndedAppendEvent(t *testing.T) {
	st := s.lossy(t)
	start := tail(t, st.B)
	e := event(s.task(t), 1)
	endContext(t, st, "AppendEvent", func(ctx context.Context) error {
		_, err := st.A.AppendEvent(ctx, e)
		return err
	})
	all := trailAll(t, st.B, start, taskstate.MaxEventsLimit)
	if len(all) != 1 || !sameEvent(all[0], e, all[0].Seq) {
		t.Fatalf("the trail after an AppendEvent whose context ended = %+v; want its entry once", all)
	}
	appendEvent(t, st.A, e, 0, all[0].Seq)
	wantTrail(t, start, all, st.A, st.B)
}
