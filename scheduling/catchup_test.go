package scheduling

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// catchUpTask is an hourly locked task with the given catch-up window.
func catchUpTask(x *exclusive, window time.Duration) func() []Task {
	return func() []Task {
		return []Task{NewTask(x.task, Cron("0 * * * *"), Lock("k"), Name("hourly"), CatchUp(window))}
	}
}

// downAcross runs the hourly task on 3 nodes from 00:10 until 01:10, stops
// every node, lets the clock reach restart (the 02:00 fire passing with no
// node up), and starts 3 nodes again on the same driver and store. The
// first start is after the 00:00 fire's window.
func downAcross(t *testing.T, window, restart time.Duration) *exclusive {
	c := newCluster(t)
	x := &exclusive{}
	c.fc.Advance(10*time.Minute + window)
	c.start(3, catchUpTask(x, window))
	c.step(60*time.Minute-window, time.Minute)
	if n := x.count(); n != 1 {
		t.Fatalf("%d runs by 01:10, want the 01:00 fire", n)
	}
	c.stop()
	c.fc.Advance(restart - c.fc.Since(epoch))
	c.start(3, catchUpTask(x, window))
	c.step(time.Minute, time.Second)
	return x
}

func TestCatchUpRunsTheMissedFireOnce(t *testing.T) {
	x := downAcross(t, 30*time.Minute, 2*time.Hour+20*time.Minute)
	fires := x.list()
	if len(fires) != 2 || !fires[1].Equal(epoch.Add(2*time.Hour)) {
		t.Fatalf("runs %v, want 01:00 and the missed 02:00, once", fires)
	}
	if x.most.Load() != 1 {
		t.Errorf("%d runs overlapped, want 1", x.most.Load())
	}
}

func TestCatchUpSkipDoesNotRunTheMissedFire(t *testing.T) {
	x := downAcross(t, 0, 2*time.Hour+20*time.Minute)
	if fires := x.list(); len(fires) != 1 {
		t.Fatalf("runs %v, want only 01:00: skip does not catch up", fires)
	}
}

func TestCatchUpAfterTheWindowDoesNotRun(t *testing.T) {
	x := downAcross(t, 30*time.Minute, 2*time.Hour+40*time.Minute)
	if fires := x.list(); len(fires) != 1 {
		t.Fatalf("runs %v, want only 01:00: the 02:00 fire is 40m old, outside the 30m window", fires)
	}
}

// A fire that ran before the cluster went down is not run again. (The
// cluster's first start is also a start: it catches up the fire within the
// window before it, which no node claimed.)
func TestCatchUpDoesNotRepeatAFireThatRan(t *testing.T) {
	c := newCluster(t)
	x := &exclusive{}
	c.fc.Advance(50 * time.Minute)
	c.start(3, catchUpTask(x, 30*time.Minute))
	c.step(15*time.Minute, time.Minute)
	c.stop()
	c.fc.Advance(10 * time.Minute)
	c.start(3, catchUpTask(x, 30*time.Minute))
	c.step(time.Minute, time.Second)
	if fires := x.list(); len(fires) != 1 {
		t.Fatalf("runs %v, want 01:00 once: it ran before the restart", fires)
	}
}

// TestCatchUpRandomOutages runs seeded random outages of the whole cluster
// (and restarts of some nodes only) over a day and checks: no fire runs
// twice; a fire missed while every node was down runs when the cluster comes
// back within the window, and not otherwise; every fire while nodes were up
// runs.
func TestCatchUpRandomOutages(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomOutages(t, seed) })
	}
}

func randomOutages(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	const window = 40 * time.Minute
	c := newCluster(t)
	x := &exclusive{}
	want := map[time.Time]bool{epoch: true} // the first start catches up the fire at its instant
	c.start(3, catchUpTask(x, window))
	for c.fc.Since(epoch) < 24*time.Hour {
		up := time.Duration(1+rng.IntN(150)) * time.Minute
		from := c.fc.Now()
		c.step(up, time.Minute)
		for f := from.Truncate(time.Hour).Add(time.Hour); !f.After(c.fc.Now()); f = f.Add(time.Hour) {
			want[f] = true
		}
		c.stop()
		down := time.Duration(1+rng.IntN(150))*time.Minute + time.Duration(rng.IntN(60))*time.Second
		stopped := c.fc.Now()
		c.fc.Advance(down)
		now := c.fc.Now()
		if last := now.Truncate(time.Hour); last.After(stopped) && now.Sub(last) <= window {
			want[last] = true
		}
		c.start(1+rng.IntN(3), catchUpTask(x, window))
		c.step(time.Second, time.Second)
	}
	c.stop()
	got := map[time.Time]int{}
	for _, f := range x.list() {
		got[f]++
	}
	for f, n := range got {
		if n != 1 || !want[f] {
			t.Errorf("seed %d: fire %v ran %d times; expected: %v", seed, f, n, want[f])
		}
	}
	for f := range want {
		if got[f] == 0 {
			t.Errorf("seed %d: fire %v never ran", seed, f)
		}
	}
}

func TestCatchUpValidation(t *testing.T) {
	noop := func(context.Context) error { return nil }
	for name, tc := range map[string]struct {
		task Task
		rule string
	}{
		"unlocked": {NewTask(noop, Cron("@hourly"), Name("a"), CatchUp(time.Hour)), "needs lock"},
		"too long": {NewTask(noop, Cron("@hourly"), Name("a"), Lock("k"), CatchUp(13*time.Hour)), "must not exceed 12h0m0s"},
		"negative": {NewTask(noop, Cron("@hourly"), Name("a"), Lock("k"), CatchUp(-time.Second)), "must not be negative"},
	} {
		err := Validate(tc.task)
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Option != "catchUp" || !containsAll(ve.Problems[0].Rule, tc.rule) {
			t.Errorf("%s: err = %v, want one catchUp problem saying %q", name, err, tc.rule)
		}
	}
	if err := Validate(NewTask(noop, Cron("@hourly"), Name("a"), CatchUp(0))); err != nil {
		t.Errorf("CatchUp(0) (skip) on an unlocked task: %v, want valid", err)
	}
}
