package redislocks_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

// A waiter on one node wakes when a holder on another node releases, with
// polling set so slow that only the notification can explain the wake.
func TestWaitWakesAcrossNodes(t *testing.T) {
	s := redistest.Start(t)
	nodeA, nodeB := newDriver(t, s.Client(), "watch"), newDriver(t, s.Client(), "watch")
	ctx := context.Background()
	holder, err := nodeB.Acquire(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var lease locks.Lease
	watching := make(chan struct{})
	go func() {
		// Once the subscription is up, the holder may release. This watch
		// stops before Wait watches: a release wakes one local watcher, and
		// it must be Wait's.
		_, stop := nodeA.Watch("job")
		stop()
		close(watching)
		l, err := locks.Wait(ctx, nodeA, "job", time.Minute, locks.WaitOptions{Budget: 30 * time.Second, Step: time.Hour})
		lease = l
		got <- err
	}()
	<-watching
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Wait on node A after node B released: %v", err)
	}
	if lease.Token() <= holder.Token() {
		t.Fatalf("waiter's token %d not above the holder's %d", lease.Token(), holder.Token())
	}
	_ = lease.Release(ctx)
}

// One release wakes one local waiter, the longest waiting, so waiters do
// not stampede Redis.
func TestReleaseWakesOneWaiterInOrder(t *testing.T) {
	s := redistest.Start(t)
	d, other := newDriver(t, s.Client(), "watch"), newDriver(t, s.Client(), "watch")
	ctx := context.Background()
	var waiters [3]<-chan struct{}
	for i := range waiters {
		ch, stop := d.Watch("job")
		defer stop()
		waiters[i] = ch
	}
	for round := range waiters {
		l, err := other.Acquire(ctx, "job", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		probeLease, err := other.Acquire(ctx, "probe", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		probe, stopProbe := d.Watch("probe")
		// The waiters' failed attempts mark both leases as waited for;
		// without them the other node's releases would publish nothing.
		for _, k := range []string{"job", "probe"} {
			if _, err := d.Acquire(ctx, k, time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
				t.Fatalf("Acquire(%q) of a held key = %v", k, err)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// The probe's release is published after the job's, so once it
		// arrives every wake for the job's release has happened.
		if err := probeLease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lockstest.Closes(t, probe, "probe")
		stopProbe()
		for i, w := range waiters {
			if want := i > round; lockstest.IsOpen(w) != want {
				t.Fatalf("after release %d waiter %d open = %v, want %v", round+1, i, !want, want)
			}
		}
	}
}

// The subscription goroutine starts with the first Watch and ends on Close,
// or on its own shortly after the last watcher stops.
func TestSubscriptionLifecycle(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	d := newDriver(t, c, "watch")
	l, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("a driver that was never watched runs goroutines: %v", err)
	}

	_, stop := d.Watch("k")
	if !subscriptionRunning() {
		t.Fatal("Watch started no subscription goroutine")
	}
	stop()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)

	// Without Close, the goroutine ends after the last watcher stops.
	_, stop1 := d.Watch("k")
	_, stop2 := d.Watch("other")
	stop1()
	stop1() // idempotent: must not count as the second watcher stopping
	if !subscriptionRunning() {
		t.Fatal("the subscription ended while a watcher was left")
	}
	stop2()
	goleak.VerifyNone(t, before)
}

// After Redis restarts, the subscription comes back by itself and waiters
// wake (a release may have been missed while it was down).
func TestSubscriptionSurvivesRestart(t *testing.T) {
	s := redistest.Start(t)
	d := newDriver(t, s.Client(), "watch")
	ctx := context.Background()
	released, stop := d.Watch("k")
	defer stop()
	s.Restart()
	lockstest.Closes(t, released, "watch across a restart")

	// And it delivers releases again.
	l, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	again, stopAgain := d.Watch("k")
	defer stopAgain()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, again, "watch after the subscription came back")
}

// subscriptionRunning reports whether a driver's subscription goroutine
// exists now.
func subscriptionRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "redislocks.(*subscriber).listen(")
}

// A release is published only if someone waits for it: an uncontended lock
// costs no notification.
func TestReleasePublishesOnlyWhenWaitedFor(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	ps := c.PSubscribe(ctx, "ndigo:*")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	d, other := newDriver(t, c, "pub"), newDriver(t, c, "pub")

	quiet, err := d.Acquire(ctx, "quiet", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := quiet.Release(ctx); err != nil {
		t.Fatal(err)
	}
	contended, err := d.Acquire(ctx, "contended", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, "contended", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("Acquire of a held key = %v", err)
	}
	if err := contended.Extend(ctx, time.Minute); err != nil { // the mark survives Extend
		t.Fatal(err)
	}
	if err := contended.Release(ctx); err != nil {
		t.Fatal(err)
	}
	watched, err := d.Acquire(ctx, "watched", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, stop := d.Watch("watched") // a local watcher that has not tried yet
	defer stop()
	if err := watched.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ndigo:pub:released:contended", "ndigo:pub:released:watched"} {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Channel != want {
			t.Fatalf("published on %q, want %q (an uncontended release must publish nothing)", msg.Channel, want)
		}
	}
}
