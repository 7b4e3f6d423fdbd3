package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// A dying store makes each mutating call of a node fail at random, before
// it reaches the store (the node died before sending it) or after the
// store made it (the reply was lost, or the node died after): the client
// then sends the action again, with its key, through the other node.
type dyingStore struct {
	taskstate.Store
	mu   sync.Mutex
	rnd  *rand.Rand
	p    float64 // the chance of each fault
	hits int
}

var errDied = errors.New("the node died")

// call makes the call f, failing it at random before or after.
func (d *dyingStore) call(f func() error) error {
	d.mu.Lock()
	x := d.rnd.Float64()
	d.mu.Unlock()
	switch {
	case x < d.p:
		d.count()
		return errDied
	case x < 2*d.p:
		if err := f(); err != nil {
			return err
		}
		d.count()
		return errDied
	}
	return f()
}

func (d *dyingStore) count() { d.mu.Lock(); d.hits++; d.mu.Unlock() }

func (d *dyingStore) AppendEvent(ctx context.Context, e taskstate.Event) (out taskstate.Event, err error) {
	err = d.call(func() (err error) { out, err = d.Store.AppendEvent(ctx, e); return err })
	return out, err
}
func (d *dyingStore) SetPaused(ctx context.Context, task string, p taskstate.Pause) error {
	return d.call(func() error { return d.Store.SetPaused(ctx, task, p) })
}
func (d *dyingStore) RequestRun(ctx context.Context, task string, at time.Time) error {
	return d.call(func() error { return d.Store.RequestRun(ctx, task, at) })
}
func (d *dyingStore) StartBackfill(ctx context.Context, b taskstate.Backfill, ran []time.Time) error {
	return d.call(func() error { return d.Store.StartBackfill(ctx, b, ran) })
}
func (d *dyingStore) EndBackfill(ctx context.Context, task, id, state string) (ok bool, err error) {
	err = d.call(func() (err error) { ok, err = d.Store.EndBackfill(ctx, task, id, state); return err })
	return ok, err
}
func (d *dyingStore) CreateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return d.call(func() error { return d.Store.CreateSchedule(ctx, sc) })
}
func (d *dyingStore) UpdateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return d.call(func() error { return d.Store.UpdateSchedule(ctx, sc) })
}
func (d *dyingStore) DeleteSchedule(ctx context.Context, name string) (ok bool, err error) {
	err = d.call(func() (err error) { ok, err = d.Store.DeleteSchedule(ctx, name); return err })
	return ok, err
}

// Random control actions from two actors, each sent again with its key
// through the other node until it is answered, while every mutating call
// of the nodes may die before or after the store made it: the trail keeps
// each action once, with its actor, in the order they were asked, each
// refusal after its action; the pause flag, the stored schedules and the
// calendars end as the answered actions made them; and no backfill or
// manual run is asked twice.
func TestTrailKeepsEachActionOnceThroughDeaths(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { trailThroughDeaths(t, seed, 60) })
	}
}

func trailThroughDeaths(t *testing.T, seed uint64, actions int) {
	rnd := rand.New(rand.NewPCG(seed, 38))
	c := newCluster(t)
	noop := func(context.Context) error { return nil }
	var nodes []*Scheduler
	var stores []*dyingStore
	for i := range 2 {
		d := &dyingStore{Store: c.store, rnd: rand.New(rand.NewPCG(seed, uint64(i))), p: 0.08}
		s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: fmt.Sprintf("node-%d", i), State: d})
		mustAdd(t, s, NewTask(noop, Cron("0 * * * *"), Lock("k"), Name("report")))
		if err := s.Handle("tenant-report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
			t.Fatal(err)
		}
		nodes, stores = append(nodes, s), append(stores, d)
	}
	ctx := context.Background()
	type asked struct{ key, action, target, actor string }
	var want []asked // the actions answered, in the order asked
	paused, schedules, calendars := false, map[string]bool{}, map[string]bool{}
	backfilling := false
	var trace []string // each try, for a failure
	defer func() {
		if t.Failed() {
			t.Log(strings.Join(trace, "\n"))
		}
	}()
	for i := range actions {
		actor := []string{"ops", "ci.deploy"}[rnd.IntN(2)]
		key := fmt.Sprintf("k%d", i)
		sc := acmeReport()
		sc.Name = fmt.Sprintf("report-%d", rnd.IntN(3))
		cal := taskstate.Calendar{Name: fmt.Sprintf("holidays-%d", rnd.IntN(2)), CalendarRules: taskstate.CalendarRules{Dates: []string{"2026-12-25"}}}
		var action, target string
		var do func(s *Scheduler, opts ...ControlOption) error
		switch rnd.IntN(10) {
		case 0:
			action, target, do = "pause", "report", func(s *Scheduler, o ...ControlOption) error { return s.Pause(ctx, "report", o...) }
		case 1:
			action, target, do = "resume", "report", func(s *Scheduler, o ...ControlOption) error { return s.Resume(ctx, "report", o...) }
		case 2:
			action, target, do = "run", "report", func(s *Scheduler, o ...ControlOption) error { return s.RunNow(ctx, "report", o...) }
		case 3:
			action, target, do = "backfill", "report", func(s *Scheduler, o ...ControlOption) error {
				_, err := s.Backfill(ctx, "report", epoch.Add(-3*time.Hour), epoch.Add(-time.Hour), BackfillOptions{}, o...)
				return err
			}
		case 4:
			action, target, do = "cancel-backfill", "report", func(s *Scheduler, o ...ControlOption) error { return s.CancelBackfill(ctx, "report", o...) }
		case 5:
			action, target, do = "create-schedule", sc.Name, func(s *Scheduler, o ...ControlOption) error { return s.CreateSchedule(ctx, sc, o...) }
		case 6:
			sc.Cron = fmt.Sprintf("%d 3 * * *", i%60)
			action, target, do = "update-schedule", sc.Name, func(s *Scheduler, o ...ControlOption) error { return s.UpdateSchedule(ctx, sc, o...) }
		case 7:
			action, target, do = "delete-schedule", sc.Name, func(s *Scheduler, o ...ControlOption) error { return s.DeleteSchedule(ctx, sc.Name, o...) }
		case 8:
			action, target, do = "create-calendar", cal.Name, func(s *Scheduler, o ...ControlOption) error { return s.CreateCalendar(ctx, cal, o...) }
		default:
			action, target, do = "delete-calendar", cal.Name, func(s *Scheduler, o ...ControlOption) error { return s.DeleteCalendar(ctx, cal.Name, o...) }
		}
		var err error
		for try := 0; ; try++ {
			if try == 100 {
				t.Fatalf("action %d (%s %s) not answered in 100 tries: %v", i, action, target, err)
			}
			err = do(nodes[(i+try)%2], By(actor), WithKey(key))
			trace = append(trace, fmt.Sprintf("%s %s %s try %d: %v", key, action, target, try, err))
			if !errors.Is(err, errDied) {
				break
			}
		}
		refused := refusal(err)
		if err != nil && !refused {
			t.Fatalf("action %d (%s %s): %v", i, action, target, err)
		}
		want = append(want, asked{key, action, target, actor})
		if refused {
			want = append(want, asked{key + "/refused", ActionRefused, target, actor})
			continue
		}
		switch action {
		case "pause", "resume":
			paused = action == "pause"
		case "backfill":
			backfilling = true
		case "cancel-backfill":
			backfilling = false
		case "create-schedule", "update-schedule":
			schedules[target] = true
		case "delete-schedule":
			delete(schedules, target)
		case "create-calendar":
			calendars[target] = true
		case "delete-calendar":
			delete(calendars, target)
		}
	}

	evs, err := c.store.Events(ctx, 0, MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	var got []asked
	for _, e := range evs {
		got = append(got, asked{e.Key, e.Action, e.Target, e.Actor})
	}
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			t.Fatalf("trail entry %d: %v, want %v (%d entries, want %d)", i, got[min(i, len(got)-1)], want[min(i, len(want)-1)], len(got), len(want))
		}
	}
	if p, _ := c.store.Paused(ctx, "report"); p.Paused != paused {
		t.Errorf("paused %v, want %v", p.Paused, paused)
	}
	scs, _ := c.store.Schedules(ctx)
	gotSc, gotCal := map[string]bool{}, map[string]bool{}
	for _, sc := range scs {
		if name, ok := strings.CutPrefix(sc.Name, calendarPrefix); ok {
			gotCal[name] = true
		} else {
			gotSc[sc.Name] = true
		}
	}
	if fmt.Sprint(gotSc) != fmt.Sprint(schedules) || fmt.Sprint(gotCal) != fmt.Sprint(calendars) {
		t.Errorf("schedules %v and calendars %v, want %v and %v", gotSc, gotCal, schedules, calendars)
	}
	p, _ := c.store.Poll(ctx)
	if b, ok := p.Backfills["report"]; (ok && b.State == taskstate.BackfillRunning) != backfilling {
		t.Errorf("backfill %+v, want running %v", b, backfilling)
	}
	hits := stores[0].hits + stores[1].hits
	if hits == 0 {
		t.Error("no call died")
	}
}
