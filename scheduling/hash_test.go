package scheduling

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
)

// 1,000 tasks on "H * * * *" spread over the hour: no minute takes more
// than 3% of them, and every node, and a node started again, gives each
// task the same instant.
func TestHSpreadsTasksOverTheHour(t *testing.T) {
	const n = 1000
	nexts := func() []time.Time {
		s := New(Config{Clock: clockwork.NewFakeClockAt(epoch), Location: time.UTC})
		for i := range n {
			mustAdd(t, s, NewTask(func(context.Context) error { return nil }, Cron("H * * * *"), Name(fmt.Sprintf("report-%04d", i))))
		}
		var out []time.Time
		for _, ti := range s.Tasks() {
			if ti.Spec.Cron != "H * * * *" {
				t.Fatalf("spec cron %q, want the expression as written", ti.Spec.Cron)
			}
			out = append(out, ti.Next)
		}
		return out
	}
	first := nexts()
	perMinute := map[int]int{}
	for _, next := range first {
		if next.Second() != 0 || next.Sub(epoch) > time.Hour || !next.After(epoch) {
			t.Fatalf("next fire %v, want a whole minute within the hour after %v", next, epoch)
		}
		perMinute[next.Minute()]++
	}
	most := 0
	for _, c := range perMinute {
		most = max(most, c)
	}
	if len(perMinute) != 60 || most > n*3/100 {
		t.Errorf("%d minutes used, the busiest with %d tasks; want all 60, none above %d", len(perMinute), most, n*3/100)
	}
	for node := range 3 {
		if again := nexts(); fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("node %d resolves other instants than the first", node)
		}
	}
}

// Each form of H resolves within its field, to the same value for the same
// name; expressions without H are left alone (THU is a day, not an H).
func TestHForms(t *testing.T) {
	for _, c := range []struct {
		expr  string
		check func(fields []string) bool
	}{
		{"H(0-29) 2 * * *", func(f []string) bool { return atoiIn(f[0], 0, 29) && f[1] == "2" }},
		{"H/15 * * * *", func(f []string) bool {
			start, rest, _ := strings.Cut(f[0], "-")
			return atoiIn(start, 0, 14) && rest == "59/15"
		}},
		{"H(10-40)/10 * * * *", func(f []string) bool {
			start, rest, _ := strings.Cut(f[0], "-")
			return atoiIn(start, 10, 19) && rest == "40/10"
		}},
		{"H H H * *", func(f []string) bool { return atoiIn(f[0], 0, 59) && atoiIn(f[1], 0, 23) && atoiIn(f[2], 1, 28) }},
		{"H H * * * *", func(f []string) bool { return atoiIn(f[0], 0, 59) && atoiIn(f[1], 0, 59) }},
		{"0 H * * MON-THU", func(f []string) bool { return atoiIn(f[1], 0, 23) && f[4] == "MON-THU" }},
		{"5,H 1 * * *", func(f []string) bool { a, b, _ := strings.Cut(f[0], ","); return a == "5" && atoiIn(b, 0, 59) }},
	} {
		for _, name := range []string{"a", "billing.Export", "report-0001"} {
			got, err := resolveH(c.expr, name)
			again, _ := resolveH(c.expr, name)
			if err != nil || got != again || !c.check(strings.Fields(got)) {
				t.Errorf("resolveH(%q, %q) = %q, %v (again %q)", c.expr, name, got, err, again)
			}
			if _, err := parseSchedule(got, time.UTC); err != nil {
				t.Errorf("%q resolves to %q, which does not parse: %v", c.expr, got, err)
			}
		}
	}
	if got, _ := resolveH("CRON_TZ=Asia/Ho_Chi_Minh H 2 * * *", "a"); !strings.HasPrefix(got, "CRON_TZ=Asia/Ho_Chi_Minh ") || hasH(strings.TrimPrefix(got, "CRON_TZ=Asia/Ho_Chi_Minh ")) {
		t.Errorf("zoned: %q, want the zone kept and H resolved", got)
	}
	for _, expr := range []string{"@hourly", "0 2 * * THU", "@every 5m"} {
		if got, err := resolveH(expr, "a"); got != expr || err != nil {
			t.Errorf("resolveH(%q) = %q, %v; want it unchanged", expr, got, err)
		}
	}
}

func atoiIn(s string, lo, hi int) bool {
	var v int
	_, err := fmt.Sscanf(s, "%d", &v)
	return err == nil && fmt.Sprint(v) == s && v >= lo && v <= hi
}

// A bad H item fails validation, naming the field, the item and the rule.
func TestHRefusesBadItems(t *testing.T) {
	for expr, want := range map[string]string{
		"H(30-70) * * * *": `minute field "H(30-70)": the range 30-70 must lie within 0-59, its start first`,
		"H(9-3) * * * *":   `minute field "H(9-3)": the range 9-3 must lie within 0-59, its start first`,
		"H/0 * * * *":      `minute field "H/0": the step after H/ must be a whole number from 1 to 60`,
		"0 H/25 * * *":     `hour field "H/25": the step after H/ must be a whole number from 1 to 24`,
		"H(1-5 * * * *":    `minute field "H(1-5": a closing parenthesis must follow the range`,
		"0 0 H(1-31) * *":  `day of month field "H(1-31)": the range 1-31 must lie within 1-28`,
		"Hx * * * *":       "", // not an H item: the parser refuses it
	} {
		_, err := parseSchedule(expr, time.UTC)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseSchedule(%q) = %v, want an error containing %q", expr, err, want)
		}
	}
	s := New(Config{Clock: clockwork.NewFakeClockAt(epoch)})
	err := s.Add(NewTask(func(context.Context) error { return nil }, Cron("H(0-99) * * * *"), Name("t")))
	if err == nil || !strings.Contains(err.Error(), `option cron = "H(0-99) * * * *": must be a valid cron expression (minute field "H(0-99)": the range 0-99 must lie within 0-59`) {
		t.Errorf("Add = %v, want the problem named", err)
	}
}

// A jittered task's fires keep their instants (Run.Fire, one run each in
// a cluster of two) and start within the jitter after them, by offsets
// that differ from fire to fire; the lateness that listeners see is
// measured from the shifted start.
func TestJitterShiftsEachFireWithinItsWindow(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	driver := locks.NewInProcessDriver(locks.WithClock(fc))
	var x fires
	late := &latenessRecorder{}
	var nodes []*Scheduler
	for i := range 2 {
		s := New(Config{Clock: fc, Driver: driver, Node: fmt.Sprint("n", i), Listeners: []Listener{late}, Logger: slog.New(slog.DiscardHandler)})
		mustAdd(t, s, NewTask(x.task, Cron("@every 1m"), Lock("k"), Jitter(30*time.Second), Name("report")))
		mustStart(t, s)
		defer s.Stop(context.Background())
		nodes = append(nodes, s)
	}
	starts := map[time.Time]time.Time{}
	for range 10*60 + 30 { // the fire at 00:10 starts within its jitter after
		before := x.count()
		step(t, fc, time.Second, time.Second, nodes...)
		if x.count() > before {
			runs := x.list()
			starts[runs[len(runs)-1]] = fc.Now()
		}
	}
	// 00:00 to 00:10: the nodes started at 00:00, before that fire's
	// shifted start.
	if x.count() != 11 || len(starts) != 11 {
		t.Fatalf("%d runs of %d fires in 10 minutes, want 11, once each", x.count(), len(starts))
	}
	offsets := map[time.Duration]bool{}
	for fire, start := range starts {
		want := jitterOffset("report", fire, 30*time.Second)
		if fire.Second() != 0 || fire.Nanosecond() != 0 || start.Before(fire.Add(want)) || start.Sub(fire.Add(want)) >= time.Second {
			t.Errorf("fire %v started at %v, want the minute as its identity and a start within a step of %v after it", fire, start, want)
		}
		offsets[want] = true
	}
	if len(offsets) < 9 {
		t.Errorf("%d distinct offsets in 11 fires, want them to differ", len(offsets))
	}
	if most := late.max(); most >= time.Second {
		t.Errorf("lateness up to %v, want it measured from the shifted start (below the 1s step)", most)
	}
	// A jitter must stay below the schedule's shortest interval.
	s := New(Config{Clock: fc})
	for cron, want := range map[string]string{
		"@every 1m":      `option jitter = "1m0s": must be below the schedule's shortest interval (1m0s)`,
		"0 9,10 * * *":   `option jitter = "1m0s": must be below the schedule's shortest interval`,
		"*/30 * * * * *": `option jitter = "1m0s": must be below the schedule's shortest interval (30s)`,
	} {
		if cron == "0 9,10 * * *" {
			continue // an hour apart at its shortest: a minute is fine
		}
		err := s.Add(NewTask(func(context.Context) error { return nil }, Cron(cron), Jitter(time.Minute), Name("j")))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s with a minute's jitter: %v, want %q", cron, err, want)
		}
	}
	// An hour apart at its shortest: a minute is fine.
	if err := s.Add(NewTask(func(context.Context) error { return nil }, Cron("0 9,10 * * *"), Jitter(time.Minute), Name("ok"))); err != nil {
		t.Errorf("0 9,10 * * * with a minute's jitter: %v, want it accepted", err)
	}
	if err := s.Add(NewTask(func(context.Context) error { return nil }, Cron("@hourly"), Jitter(-time.Second), Name("neg"))); err == nil ||
		!strings.Contains(err.Error(), `option jitter = "-1s": must not be negative`) {
		t.Errorf("a negative jitter: %v, want it refused", err)
	}
}

// latenessRecorder keeps the largest lateness of the runs it saw.
type latenessRecorder struct {
	NopListener
	mu   sync.Mutex
	most time.Duration
}

func (l *latenessRecorder) BeforeRun(ctx context.Context, e Event) context.Context {
	l.mu.Lock()
	l.most = max(l.most, e.Lateness)
	l.mu.Unlock()
	return ctx
}

func (l *latenessRecorder) max() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.most
}

// A node that starts between a jittered fire's instant and its shifted
// start still runs that fire; a jitter above MaxJitter is refused.
func TestJitteredFireSurvivesAStartInItsWindow(t *testing.T) {
	fire := epoch.Add(time.Minute)
	var offset time.Duration
	name := ""
	for i := 0; offset < 2*time.Second; i++ { // a name whose offset leaves room to start inside it
		name = fmt.Sprint("report-", i)
		offset = jitterOffset(name, fire, 30*time.Second)
	}
	fc := clockwork.NewFakeClockAt(fire.Add(offset / 2))
	s := New(Config{Clock: fc, Driver: locks.NewInProcessDriver(locks.WithClock(fc)), Logger: slog.New(slog.DiscardHandler)})
	var x fires
	mustAdd(t, s, NewTask(x.task, Cron("@every 1m"), Lock("k"), Jitter(30*time.Second), Name(name)))
	mustStart(t, s)
	defer s.Stop(context.Background())
	if next := s.Tasks()[0].Next; !next.Equal(fire) {
		t.Fatalf("next fire %v after a start at %v, want %v, whose start (+%v) has not come", next, fc.Now(), fire, offset)
	}
	step(t, fc, offset, time.Second, s)
	if got := x.list(); len(got) != 1 || !got[0].Equal(fire) {
		t.Fatalf("runs %v, want the fire at %v", got, fire)
	}
	err := s.Add(NewTask(func(context.Context) error { return nil }, Cron("@daily"), Jitter(7*time.Hour), Name("late")))
	if err == nil || !strings.Contains(err.Error(), `option jitter = "7h0m0s": must not exceed 6h0m0s (scheduling.MaxJitter)`) {
		t.Errorf("a 7h jitter: %v, want it refused", err)
	}
}
