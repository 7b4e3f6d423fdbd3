package taskstatetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// scheduleOf returns a schedule named name, with options and arguments
// that a store must keep as they are (Args compacted).
func scheduleOf(name, cron string) taskstate.Schedule {
	return taskstate.Schedule{Name: name, Handler: "tenant-report", Cron: cron, Lock: "report:" + name,
		Options: map[string]string{"lockTtl": "5m", "overlap": "buffer-one"},
		Args:    json.RawMessage(`{ "tenant": "acme", "days": [1, 2] }`), Node: "node-a",
		Updated: time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))}
}

// schedulesOf returns st's stored schedules whose names start with prefix.
func schedulesOf(t *testing.T, st taskstate.Store, prefix string) []taskstate.Schedule {
	t.Helper()
	all, err := st.Schedules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []taskstate.Schedule
	for i, sc := range all {
		if i > 0 && all[i-1].Name >= sc.Name {
			t.Fatalf("Schedules not ordered by name: %q before %q", all[i-1].Name, sc.Name)
		}
		if strings.HasPrefix(sc.Name, prefix) {
			out = append(out, sc)
		}
	}
	return out
}

// sameSchedule reports whether got is want as a store keeps it.
func sameSchedule(got, want taskstate.Schedule) bool {
	var args bytes.Buffer
	if len(want.Args) > 0 {
		_ = json.Compact(&args, want.Args)
	}
	return got.Name == want.Name && got.Handler == want.Handler && got.Cron == want.Cron && got.Lock == want.Lock &&
		maps.Equal(got.Options, want.Options) && bytes.Equal(got.Args, args.Bytes()) && got.Node == want.Node &&
		got.Updated.Equal(want.Updated)
}

// wantSchedules fails t unless st's schedules named with prefix are want,
// in order.
func wantSchedules(t *testing.T, st taskstate.Store, prefix string, want ...taskstate.Schedule) {
	t.Helper()
	got := schedulesOf(t, st, prefix)
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = sameSchedule(got[i], want[i])
	}
	if !ok {
		t.Fatalf("schedules = %s\nwant        %s", formatSchedules(got), formatSchedules(want))
	}
}

func formatSchedules(scs []taskstate.Schedule) string {
	var b strings.Builder
	for _, sc := range scs {
		fmt.Fprintf(&b, "\n  %+v args %s", sc, sc.Args)
	}
	return b.String()
}

// generation returns st's Poll.Schedules.
func generation(t *testing.T, st taskstate.Store) int64 {
	t.Helper()
	p, err := st.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.Schedules
}

// schedules: a created schedule reads the same from the other node, with
// its options and arguments; a second create of the name is refused, as is
// an update of an absent name, and neither changes anything; an update
// replaces it; a delete removes it, once; each change moves the generation
// that Poll reports, which both nodes see.
func (s *suite) schedules(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	prefix := s.task(t) + "/"
	first, second := scheduleOf(prefix+"acme", "0 2 * * *"), scheduleOf(prefix+"beta", "H 3 * * *")
	second.Lock, second.Options, second.Args = "", nil, nil

	g0 := generation(t, b)
	if err := a.CreateSchedule(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateSchedule(ctx, first); err != nil {
		t.Fatal(err)
	}
	g1 := generation(t, b)
	if g1 == g0 {
		t.Fatalf("Poll.Schedules = %d before and after two CreateSchedule calls; want it changed", g0)
	}
	wantSchedules(t, b, prefix, first, second)

	again := first
	again.Cron = "0 4 * * *"
	if err := b.CreateSchedule(ctx, again); !errors.Is(err, taskstate.ErrScheduleExists) {
		t.Fatalf("CreateSchedule of a stored name = %v, want taskstate.ErrScheduleExists", err)
	}
	if err := b.UpdateSchedule(ctx, scheduleOf(prefix+"absent", "0 1 * * *")); !errors.Is(err, taskstate.ErrNoSchedule) {
		t.Fatalf("UpdateSchedule of an absent name = %v, want taskstate.ErrNoSchedule", err)
	}
	if g := generation(t, a); g != g1 {
		t.Fatalf("Poll.Schedules moved from %d to %d on refused calls; want it unchanged", g1, g)
	}
	wantSchedules(t, a, prefix, first, second)

	if err := b.UpdateSchedule(ctx, again); err != nil {
		t.Fatal(err)
	}
	g2 := generation(t, a)
	if g2 == g1 {
		t.Fatalf("Poll.Schedules = %d before and after an UpdateSchedule; want it changed", g1)
	}
	wantSchedules(t, a, prefix, again, second)

	if ok, err := a.DeleteSchedule(ctx, first.Name); err != nil || !ok {
		t.Fatalf("DeleteSchedule = %v, %v; want true, nil", ok, err)
	}
	if g := generation(t, b); g == g2 {
		t.Fatalf("Poll.Schedules = %d before and after a DeleteSchedule; want it changed", g2)
	}
	if ok, err := b.DeleteSchedule(ctx, first.Name); err != nil || ok {
		t.Fatalf("DeleteSchedule of a deleted name = %v, %v; want false, nil", ok, err)
	}
	wantSchedules(t, b, prefix, second)
	if err := b.CreateSchedule(ctx, first); err != nil {
		t.Fatalf("CreateSchedule of a deleted name = %v, want nil", err)
	}
	wantSchedules(t, a, prefix, first, second)
}

// badSchedules: what CheckSchedule refuses, every store refuses, naming
// the field, and keeps nothing of.
func (s *suite) badSchedules(t *testing.T) {
	a, _ := s.pair(t, 0)
	ctx := context.Background()
	prefix := s.task(t) + "/"
	base := scheduleOf(prefix+"x", "0 2 * * *")
	bad := func(edit func(*taskstate.Schedule)) taskstate.Schedule {
		sc := base
		edit(&sc)
		return sc
	}
	for _, c := range []struct {
		name string
		sc   taskstate.Schedule
		want string
	}{
		{"empty name", bad(func(sc *taskstate.Schedule) { sc.Name = "" }), "name"},
		{"name with a line break", bad(func(sc *taskstate.Schedule) { sc.Name += "\n" }), "printable"},
		{"name too long", bad(func(sc *taskstate.Schedule) { sc.Name = strings.Repeat("n", taskstate.MaxScheduleNameLen+1) }), "over 200"},
		{"dot-dot name", bad(func(sc *taskstate.Schedule) { sc.Name = ".." }), "must not be . or .."},
		{"empty handler", bad(func(sc *taskstate.Schedule) { sc.Handler = "" }), "handler"},
		{"empty cron", bad(func(sc *taskstate.Schedule) { sc.Cron = " " }), "cron"},
		{"args not JSON", bad(func(sc *taskstate.Schedule) { sc.Args = json.RawMessage(`{"tenant":`) }), "JSON"},
		{"args too long", bad(func(sc *taskstate.Schedule) {
			sc.Args = json.RawMessage(`"` + strings.Repeat("a", taskstate.MaxScheduleArgsLen) + `"`)
		}), "args"},
		{"empty option key", bad(func(sc *taskstate.Schedule) { sc.Options = map[string]string{"": "1"} }), "key"},
	} {
		for op, call := range map[string]func(context.Context, taskstate.Schedule) error{"CreateSchedule": a.CreateSchedule, "UpdateSchedule": a.UpdateSchedule} {
			if err := call(ctx, c.sc); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s with %s: err = %v, want taskstate.ErrInvalid naming %q", op, c.name, err, c.want)
			}
		}
	}
	var nilCtx context.Context
	if err := a.CreateSchedule(nilCtx, base); !errors.Is(err, taskstate.ErrInvalid) {
		t.Errorf("CreateSchedule with a nil context: err = %v, want taskstate.ErrInvalid", err)
	}
	if _, err := a.DeleteSchedule(ctx, ""); !errors.Is(err, taskstate.ErrInvalid) {
		t.Errorf("DeleteSchedule of an empty name: err = %v, want taskstate.ErrInvalid", err)
	}
	if _, err := a.Schedules(nilCtx); !errors.Is(err, taskstate.ErrInvalid) {
		t.Errorf("Schedules with a nil context: err = %v, want taskstate.ErrInvalid", err)
	}
	wantSchedules(t, a, prefix)
}

// lostCreateSchedule: a CreateSchedule whose reply was lost, another
// node's update of it, then the retry: the call answers nil (it created
// the schedule), and the update holds.
func (s *suite) lostCreateSchedule(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	prefix := s.task(t) + "/"
	sc := scheduleOf(prefix+"acme", "0 2 * * *")
	later := sc
	later.Cron, later.Node = "0 5 * * *", "node-b"
	lose(t, st, "CreateSchedule", func() error { return a.CreateSchedule(ctx, sc) }, func() {
		if err := b.UpdateSchedule(ctx, later); err != nil {
			t.Errorf("another node's UpdateSchedule after the lost reply = %v, want nil: the call ran", err)
		}
	})
	wantSchedules(t, b, prefix, later)
}

// lostUpdateSchedule: an UpdateSchedule whose reply was lost, another
// node's later update, then the retry: the later update holds.
func (s *suite) lostUpdateSchedule(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	prefix := s.task(t) + "/"
	sc := scheduleOf(prefix+"acme", "0 2 * * *")
	if err := b.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	mine, later := sc, sc
	mine.Cron = "0 3 * * *"
	later.Cron, later.Node = "0 5 * * *", "node-b"
	lose(t, st, "UpdateSchedule", func() error { return a.UpdateSchedule(ctx, mine) }, func() {
		if got := schedulesOf(t, b, prefix); len(got) != 1 || got[0].Cron != mine.Cron {
			t.Errorf("another node's schedules after the lost UpdateSchedule = %s; want its cron %q: the call ran", formatSchedules(got), mine.Cron)
		}
		if err := b.UpdateSchedule(ctx, later); err != nil {
			t.Error(err)
		}
	})
	wantSchedules(t, b, prefix, later)
}

// lostDeleteSchedule: a DeleteSchedule whose reply was lost, another
// node's create of the name again, then the retry: the call answers true
// (it deleted one), and the new schedule stays.
func (s *suite) lostDeleteSchedule(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	prefix := s.task(t) + "/"
	sc := scheduleOf(prefix+"acme", "0 2 * * *")
	if err := b.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	again := sc
	again.Cron, again.Node = "0 6 * * *", "node-b"
	var deleted bool
	lose(t, st, "DeleteSchedule", func() error {
		ok, err := a.DeleteSchedule(ctx, sc.Name)
		deleted = ok
		return err
	}, func() {
		if err := b.CreateSchedule(ctx, again); err != nil {
			t.Errorf("another node's CreateSchedule after the lost DeleteSchedule = %v, want nil: the call ran", err)
		}
	})
	if st.Loss != Failed && !deleted {
		t.Fatalf("DeleteSchedule whose reply was lost answered false; want true: its first attempt deleted the schedule")
	}
	wantSchedules(t, b, prefix, again)
}
