package pglocks_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/pglocks"
)

// TestWatchWakesOnRelease: a release by one driver wakes the watchers of
// the key on another driver (another node) that tried to acquire it, as
// locks.Wait does (the locks.Watcher contract: Watch, then Acquire), and not
// those of other keys.
func TestWatchWakesOnRelease(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	holder, waiter := newDriver(t, p, "watch"), newDriver(t, p, "watch")
	key, other := unique("watched"), unique("other")
	l, err := holder.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	released, stop := waiter.Watch(key)
	defer stop()
	untouched, stopOther := waiter.Watch(other)
	defer stopOther()
	mustBeHeld(t, waiter, key)
	if !lockstest.IsOpen(released) {
		t.Fatal("the watch closed before the release")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, released, "after the holder's Release")
	if !lockstest.IsOpen(untouched) {
		t.Fatal("a watcher of another key was woken")
	}
	// The same key in another namespace is another lock, whose release
	// notifies once a watcher there found it held.
	elsewhere, elsewhereWaiter := newDriver(t, p, "watch-elsewhere"), newDriver(t, p, "watch-elsewhere")
	l2, err := elsewhere.Acquire(ctx, other, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	there, stopThere := elsewhereWaiter.Watch(other)
	defer stopThere()
	mustBeHeld(t, elsewhereWaiter, other)
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, there, "after the release in the other namespace")
	// Notifications arrive in commit order: once the release of key below
	// has woken its watcher, the release of other in another namespace
	// (committed before) has been seen too, and must not have woken the
	// watcher of other here. The key's row stays marked: its release
	// notifies without another failed Acquire.
	l3, err := holder.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	again, stopAgain := waiter.Watch(key)
	defer stopAgain()
	if err := l3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, again, "after the second Release")
	if !lockstest.IsOpen(untouched) {
		t.Fatal("a release in another namespace woke a watcher of the same key")
	}
}

// TestWaitWakesOnRelease: locks.Wait with a step far longer than the test
// returns as soon as the holder releases, woken by the notification.
func TestWaitWakesOnRelease(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	holder, waiter := newDriver(t, p, "wait"), newDriver(t, p, "wait")
	key := unique("wait")
	l, err := holder.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   locks.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := locks.Wait(ctx, waiter, key, time.Minute, locks.WaitOptions{Budget: time.Minute, Step: time.Hour})
		done <- result{l, err}
	}()
	// Release once the waiter watches: whether its first Acquire ran before
	// the release or after, it must not wait for the step.
	deadline := time.Now().Add(10 * time.Second)
	for !watched(waiter, key) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never watched")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
		if r.l.Token() <= l.Token() {
			t.Fatalf("waiter's token %d not above %d", r.l.Token(), l.Token())
		}
		_ = r.l.Release(ctx)
	case <-time.After(30 * time.Second):
		t.Fatal("Wait was not woken by the release")
	}
}

func watched(d *pglocks.Driver, key string) bool { return pglocks.Watchers(d, key) > 0 }

// mustBeHeld fails t unless d's Acquire of key answers locks.ErrNotAcquired.
func mustBeHeld(t *testing.T, d *pglocks.Driver, key string) {
	t.Helper()
	l, err := d.Acquire(context.Background(), key, time.Minute)
	if !errors.Is(err, locks.ErrNotAcquired) {
		if err == nil {
			_ = l.Release(context.Background())
		}
		t.Fatalf("Acquire of held key %q: %v, want locks.ErrNotAcquired", key, err)
	}
}

// TestWatchAcrossRestart: the listening connection reconnects after the
// database crashed and restarted, waking every watcher (a release may have
// been missed), and later releases wake watchers again.
func TestWatchAcrossRestart(t *testing.T) {
	s := pgtest.Start(t)
	p := s.Pool()
	ctx := context.Background()
	d := newDriver(t, p, "watch-restart")
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	key := unique("k")
	before, stop := d.Watch(key)
	defer stop()
	s.Kill()
	s.Restart()
	p.Reset()
	lockstest.Closes(t, before, "after the listening connection reconnected")
	l, err := d.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	after, stopAfter := d.Watch(key)
	defer stopAfter()
	mustBeHeld(t, d, key)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, after, "after a Release following the restart")
}

// TestReleaseWakesTheLongestWaiting: a release after a watcher's driver
// found the key held wakes one watcher of the key per driver, the one that
// watched first, and the next release the next one. A woken waiter that gives up without acquiring does not strand the
// others: locks.Wait acquires on its poll step.
func TestReleaseWakesTheLongestWaiting(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	holder, waiter := newDriver(t, p, "wake-one"), newDriver(t, p, "wake-one")
	key := unique("k")
	release := func() {
		t.Helper()
		l, err := holder.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		mustBeHeld(t, waiter, key)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first, stopFirst := waiter.Watch(key)
	defer stopFirst()
	second, stopSecond := waiter.Watch(key)
	defer stopSecond()
	release()
	lockstest.Closes(t, first, "the first watcher, after a release")
	if !lockstest.IsOpen(second) {
		t.Fatal("one release woke both watchers of the key")
	}
	release()
	lockstest.Closes(t, second, "the second watcher, after the next release")

	// A watcher woken by the release that then gives up, ahead of a
	// locks.Wait: the Wait still gets the key.
	l, err := holder.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	quitter, stopQuitter := waiter.Watch(key)
	got := make(chan error, 1)
	go func() {
		lw, err := locks.Wait(ctx, waiter, key, time.Minute, locks.WaitOptions{Budget: time.Minute, Step: 20 * time.Millisecond})
		if err == nil {
			err = lw.Release(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); pglocks.Watchers(waiter, key) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("locks.Wait never watched the key")
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, quitter, "the longest-waiting watcher")
	stopQuitter() // gives up without acquiring
	if err := <-got; err != nil {
		t.Fatalf("locks.Wait behind a watcher that gave up: %v", err)
	}
}

// TestReleaseNotifiesOnceAWatcherFoundTheKeyHeld: a release of a key that
// no watching driver found held sends no notification (it would cost the
// release's commit the database-wide NOTIFY lock); once a watcher's driver
// found it held, the release notifies, and so do the later releases of the
// key's row.
func TestReleaseNotifiesOnceAWatcherFoundTheKeyHeld(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	holder, waiter := newDriver(t, p, "notify"), newDriver(t, p, "notify")
	key := unique("k")
	conn, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{pglocks.Channel(holder)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, "UNLISTEN *") }()
	sum := md5.Sum([]byte(holder.Namespace() + "\n" + key))
	want := hex.EncodeToString(sum[:])
	// notified reports whether a notification of key arrives within d
	// (other tests' releases notify on the same channel).
	notified := func(d time.Duration) bool {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		for {
			n, err := conn.Conn().WaitForNotification(wctx)
			if err != nil {
				return false
			}
			if n.Payload == want {
				return true
			}
		}
	}
	cycle := func(contended bool) {
		t.Helper()
		l, err := holder.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if contended {
			_, stop := waiter.Watch(key)
			mustBeHeld(t, waiter, key)
			stop()
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle(false)
	// A plain Acquire of the held key, without a watcher, marks nothing.
	l, err := holder.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mustBeHeld(t, waiter, key)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if notified(300 * time.Millisecond) {
		t.Fatal("releases of a key that no watcher found held notified")
	}
	cycle(true)
	if !notified(10 * time.Second) {
		t.Fatal("the release after a watcher found the key held did not notify")
	}
	cycle(false)
	if !notified(10 * time.Second) {
		t.Fatal("a later release of the marked row did not notify")
	}
}

// TestWatcherRetriesWhenTheRowStaysLocked: an Acquire of a held key whose
// row another transaction keeps locked against the mark (FOR NO KEY UPDATE,
// as a Release or Extend being run does) answers held without marking it,
// after its retries, and a watcher of the driver is woken soon after, to try
// again, instead of at its poll step.
func TestWatcherRetriesWhenTheRowStaysLocked(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	holder, waiter := newDriver(t, p, "unmarked"), newDriver(t, p, "unmarked")
	key := unique("k")
	l, err := holder.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT FROM ndigo_locks WHERE ns = $1 AND key = $2 FOR NO KEY UPDATE", waiter.Namespace(), key); err != nil {
		t.Fatal(err)
	}
	woken, stop := waiter.Watch(key)
	defer stop()
	mustBeHeld(t, waiter, key)
	lockstest.Closes(t, woken, "after an Acquire that could not mark the row")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var waited bool
	if err := p.QueryRow(ctx, "SELECT waited FROM ndigo_locks WHERE ns = $1 AND key = $2", waiter.Namespace(), key).Scan(&waited); err != nil {
		t.Fatal(err)
	}
	if waited {
		t.Fatal("the row was marked while another transaction locked it")
	}
	again, stopAgain := waiter.Watch(key)
	defer stopAgain()
	mustBeHeld(t, waiter, key)
	if err := p.QueryRow(ctx, "SELECT waited FROM ndigo_locks WHERE ns = $1 AND key = $2", waiter.Namespace(), key).Scan(&waited); err != nil {
		t.Fatal(err)
	}
	if !waited {
		t.Fatal("the watcher's Acquire did not mark the row once it was unlocked")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, again, "after the release of the marked row")
}
