package scheduling

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/notify"
	"github.com/ndigo/ndigo/taskstate"
)

// The outage store's reads and appends of the trail fail while it is down
// (its other calls are in recorder_test.go).
func (o *outageStore) Runs(ctx context.Context, task string, n int) ([]taskstate.Run, error) {
	if err := o.err(); err != nil {
		return nil, err
	}
	return o.Store.Runs(ctx, task, n)
}

func (o *outageStore) Events(ctx context.Context, after int64, limit int) ([]taskstate.Event, error) {
	if err := o.err(); err != nil {
		return nil, err
	}
	return o.Store.Events(ctx, after, limit)
}

func (o *outageStore) AppendEvent(ctx context.Context, e taskstate.Event) (taskstate.Event, error) {
	if err := o.err(); err != nil {
		return taskstate.Event{}, err
	}
	return o.Store.AppendEvent(ctx, e)
}

// An inbox keeps the messages it is given; while hold is set, each attempt
// waits for its context's end instead.
type inbox struct {
	mu   sync.Mutex
	got  []notify.Message
	hold chan struct{} // closed by an attempt that holds; nil: none holds
}

func (b *inbox) Notify(ctx context.Context, m notify.Message) error {
	b.mu.Lock()
	hold := b.hold
	b.hold = nil
	b.mu.Unlock()
	if hold != nil {
		close(hold)
		<-ctx.Done()
		return ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, m)
	return nil
}

func (b *inbox) events() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.got {
		out = append(out, m.Task+" "+m.Event)
	}
	return out
}

// judgeNow is one judgement of a, its messages delivered before it returns.
func judgeNow(a *Alerter) {
	a.tick(context.Background())
	a.wg.Wait()
}

// notices returns the trail's notify entries as "task event".
func notices(t *testing.T, st taskstate.Store) []taskstate.Event {
	t.Helper()
	evs, err := st.Events(context.Background(), 0, MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	var out []taskstate.Event
	for _, ev := range evs {
		if ev.Action == ActionNotify || ev.Action == ActionNotifyFailed {
			out = append(out, ev)
		}
	}
	return out
}

func wantEvents(t *testing.T, b *inbox, want ...string) {
	t.Helper()
	if got := b.events(); !slices.Equal(got, want) {
		t.Fatalf("messages %q, want %q", got, want)
	}
}

// While the task state store is down, a task whose fires fail (their flag
// is unreadable) is reported late, then down, judged from the history last
// read and the node's unstored records; once the store is back the trail
// keeps both messages, in order, and the first run makes one "recovered".
// An Alerter that starts afresh (a restarted node) reads the trail and
// sends nothing again.
func TestAlerterReportsAnOutageWhileItLasts(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	inner, _ := taskstate.NewInProcess(0)
	store := &outageStore{Store: inner}
	s := New(Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), State: store, Node: "n1",
		Driver: locks.NewInProcessDriver(locks.WithClock(fc))})
	var x exclusive
	mustAdd(t, s, NewTask(x.task, Cron("@every 1m"), Lock("k"), Name("report"), LateAfter(10*time.Second),
		DownAfter(150*time.Second)))
	mustStart(t, s)
	defer s.Stop(context.Background())
	box := &inbox{}
	a, err := NewAlerter(s, AlertConfig{Notifiers: []notify.Notifier{box}, Every: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	step(t, fc, 2*time.Minute+20*time.Second, time.Second, s) // runs at 00:01, 00:02
	judgeNow(a)
	wantEvents(t, box)

	store.down.Store(true)
	step(t, fc, time.Minute, time.Second, s) // 00:03 fails; late at 00:03:10
	judgeNow(a)
	wantEvents(t, box, "report late")
	step(t, fc, 2*time.Minute, time.Second, s) // down at 00:05:30 (00:03 + 150s)
	judgeNow(a)
	wantEvents(t, box, "report late")
	step(t, fc, 10*time.Second, time.Second, s)
	judgeNow(a)
	wantEvents(t, box, "report late", "report down")
	if n := len(notices(t, inner)); n != 0 {
		t.Fatalf("the trail keeps %d messages while the store is down", n)
	}
	late, down := box.got[0], box.got[1]
	if !late.At.Equal(epoch.Add(3*time.Minute+10*time.Second)) || !down.At.Equal(epoch.Add(5*time.Minute+30*time.Second)) {
		t.Errorf("late at %v, down at %v: want 00:03:10 and 00:05:30", late.At, down.At)
	}

	store.down.Store(false)
	step(t, fc, time.Minute, time.Second, s) // 00:06:40 ... 00:07 runs
	judgeNow(a)
	wantEvents(t, box, "report late", "report down", "report recovered")
	kept := notices(t, inner)
	if len(kept) != 3 {
		t.Fatalf("the trail keeps %d messages, want 3: %+v", len(kept), kept)
	}
	for i, ev := range kept {
		if m := box.got[i]; ev.Key != m.ID || ev.Target != "report" || ev.Actor != "ndigo" || ev.Node != "n1" || ev.Action != ActionNotify {
			t.Errorf("trail entry %d = %+v, want message %+v kept by ndigo on n1", i, ev, m)
		}
	}
	if box.got[2].ID == late.ID || late.ID == down.ID {
		t.Errorf("IDs %s, %s, %s: want three", late.ID, down.ID, box.got[2].ID)
	}

	again, _ := NewAlerter(s, AlertConfig{Notifiers: []notify.Notifier{box}, Every: 10 * time.Second})
	judgeNow(again)
	wantEvents(t, box, "report late", "report down", "report recovered")
}

// Two nodes: one holds AlertLease and sends; when it dies while delivering,
// the other sends the same message under the same ID, and the trail keeps
// it once.
func TestAlerterSenderDiesWhileDelivering(t *testing.T) {
	c := newCluster(t)
	c.start(2, func() []Task {
		return []Task{NewTask(func(context.Context) error { return errStoreDown }, Cron("@every 1m"), Lock("k"), Name("report"))}
	})
	c.step(time.Minute+time.Second, time.Second) // 00:01 fails: failing
	box := &inbox{hold: make(chan struct{})}
	held := box.hold
	var as []*Alerter
	for _, s := range c.nodes {
		a, err := NewAlerter(s, AlertConfig{Notifiers: []notify.Notifier{box}, Every: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	}
	ctx, die := context.WithCancel(context.Background())
	as[0].tick(ctx)
	<-held // node-0 is delivering
	as[1].tick(context.Background())
	as[1].wg.Wait()
	wantEvents(t, box) // node-1 does not hold the lease
	die()
	as[0].wg.Wait()
	wantEvents(t, box)
	if n := len(notices(t, c.store)); n != 0 {
		t.Fatalf("the trail keeps %d messages of a delivery cut short", n)
	}
	c.fc.Advance(30 * time.Second) // node-0's lease lapses
	judgeNow(as[1])
	wantEvents(t, box, "report failing")
	kept := notices(t, c.store)
	if len(kept) != 1 || kept[0].Node != "node-1" || kept[0].Key != box.got[0].ID {
		t.Fatalf("trail %+v, want node-1's message %s once", kept, box.got[0].ID)
	}
	judgeNow(as[1])
	wantEvents(t, box, "report failing")

	// node-1 dies too; node-0, restarted, takes the lease and learns from
	// the trail that "failing" was sent.
	restarted, _ := NewAlerter(c.nodes[0], AlertConfig{Notifiers: []notify.Notifier{box}, Every: 10 * time.Second})
	c.fc.Advance(30 * time.Second)
	judgeNow(restarted)
	if restarted.lease == nil {
		t.Fatal("the restarted node does not hold the lease")
	}
	wantEvents(t, box, "report failing")
}

// NewAlerter names what it lacks.
func TestNewAlerterRefusesBadConfig(t *testing.T) {
	s := New(Config{})
	if _, err := NewAlerter(s, AlertConfig{Notifiers: []notify.Notifier{&inbox{}}}); err == nil {
		t.Error("no task state store: no error")
	}
	store, _ := taskstate.NewInProcess(0)
	s = New(Config{State: store})
	for _, cfg := range []AlertConfig{{}, {Notifiers: []notify.Notifier{nil}}, {Notifiers: []notify.Notifier{&inbox{}}, Every: -1}} {
		if _, err := NewAlerter(s, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
