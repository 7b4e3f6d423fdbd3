package scheduling

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

func TestZZScratchWalkableOverflow(t *testing.T) {
	for _, expr := range []string{"0 * * * *", "0 */3 * * *", "0 0 * * *"} {
		fc := clockwork.NewFakeClockAt(epoch)
		st, _ := taskstate.NewInProcess(taskstate.MaxHistory)
		s := New(Config{Clock: fc, State: st, Logger: slog.New(slog.DiscardHandler), Location: time.UTC})
		mustAdd(t, s, NewTask(func(context.Context) error { return nil }, Cron(expr), Name("t")))
		mustStart(t, s)
		// The cluster recorded one run 20h ago; nothing since.
		fc.Advance(20 * time.Hour)
		_ = st.Record(context.Background(), taskstate.TaskRun{Task: "t", Run: taskstate.Run{Fire: epoch.Add(time.Hour), Start: epoch.Add(time.Hour), Outcome: "ok", Node: "x"}})
		a, err := s.Audit(context.Background(), "t")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-12s from=%v fires=%d ran=%d missed=%d", expr, a.From, len(a.Fires), a.Ran, a.Missed)
		_ = s.Stop(context.Background())
	}
}

func TestZZScratchJitterPastClaimLateness(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	d := locks.NewInProcessDriver(locks.WithClock(fc))
	s := New(Config{Clock: fc, Driver: d, Logger: slog.New(slog.DiscardHandler), Location: time.UTC})
	ran := 0
	mustAdd(t, s, NewTask(func(context.Context) error { ran++; return nil }, Cron("0 0 * * *"), Lock("k"), Jitter(20*time.Hour), Name("daily")))
	mustStart(t, s)
	for day := 0; day < 20; day++ {
		for h := 0; h < 24; h++ {
			fc.Advance(time.Hour)
			time.Sleep(2 * time.Millisecond)
		}
	}
	time.Sleep(50 * time.Millisecond)
	for _, ti := range s.Tasks() {
		t.Logf("ran=%d of 20 days; last=%+v", ran, ti.Last)
	}
	_ = s.Stop(context.Background())
}
