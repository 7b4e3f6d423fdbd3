package pglocks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
)

// isDatabaseErr fails t unless err wraps ErrDatabase, names key and wraps
// neither ErrNotAcquired nor ErrLeaseLost.
func isDatabaseErr(t *testing.T, what string, err error, key string) {
	t.Helper()
	if !errors.Is(err, pglocks.ErrDatabase) || errors.Is(err, locks.ErrNotAcquired) || errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("%s = %v, want ErrDatabase only", what, err)
	}
	if !strings.Contains(err.Error(), key) {
		t.Fatalf("%s: error %q does not name key %q", what, err, key)
	}
}

// TestTokensSurviveRestart: tokens keep increasing across a crash (SIGKILL
// of every server process) and restart of the database: every token after
// the restart is above every token before it, for a key released before
// the crash, a key held at the crash, and a key whose row was reclaimed
// before the crash (its next acquisition makes a new row). The tokens come
// from a sequence, which PostgreSQL WAL-logs ahead of the values it hands
// out (32 at a time): the 50 acquisitions before the crash end inside such
// a logged-ahead window, whose values must not come back.
func TestTokensSurviveRestart(t *testing.T) {
	s := pgtest.Start(t)
	p := s.Pool()
	ctx := context.Background()
	d := newDriver(t, p, "restart")
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	var last uint64
	acquired := func(l locks.Lease) locks.Lease {
		t.Helper()
		if l.Token() <= last {
			t.Fatalf("token %d not above the last minted %d", l.Token(), last)
		}
		last = l.Token()
		return l
	}
	reclaimed, err := d.Acquire(ctx, "reclaimed", guardTTL)
	if err != nil {
		t.Fatal(err)
	}
	acquired(reclaimed)
	expired(t, p, "restart", reclaimed)
	for range 50 {
		l, err := d.Acquire(ctx, "released", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := acquired(l).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM ndigo_locks WHERE ns = 'restart' AND key = 'reclaimed'").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the expired key's row: %d rows, %v; want it reclaimed", rows, err)
	}
	held, err := d.Acquire(ctx, "held", guardTTL)
	if err != nil {
		t.Fatal(err)
	}
	acquired(held)
	before := last
	s.Kill()
	s.Restart()
	p.Reset() // drop the connections the crash broke
	l, err := d.Acquire(ctx, "released", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after restart: %v", err)
	}
	acquired(l)
	again, err := d.Acquire(ctx, "reclaimed", time.Minute)
	if err != nil {
		t.Fatalf("Acquire of the reclaimed key after restart: %v", err)
	}
	acquired(again)
	next := acquireSoon(t, d, "held")
	if next.Token() <= before {
		t.Fatalf("token %d of a key held at the crash not above %d, the last before the crash", next.Token(), before)
	}
}

// TestDatabaseDown: a paused database answers ErrDatabase within the
// context's deadline (plus pgx's cancellation delay), a killed one at once;
// never ErrNotAcquired or ErrLeaseLost. After a restart the lease taken
// before is still the holder.
func TestDatabaseDown(t *testing.T) {
	s := pgtest.Start(t)
	p := s.Pool()
	ctx := context.Background()
	d := newDriver(t, p, "down")
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(ctx, "held", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	s.Pause()
	const deadline = 300 * time.Millisecond
	short, cancel := context.WithTimeout(ctx, deadline)
	start := time.Now()
	_, err = d.Acquire(short, "paused", time.Minute)
	took := time.Since(start)
	cancel()
	isDatabaseErr(t, "Acquire on a paused database", err, "paused")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire on a paused database = %v, want it to wrap context.DeadlineExceeded", err)
	}
	// pgx cancels the statement, then closes the connection a second later
	// (its default DeadlineDelay).
	if took > deadline+3*time.Second {
		t.Errorf("Acquire on a paused database took %v with a %v deadline", took, deadline)
	}
	s.Resume()

	s.Kill()
	_, err = d.Acquire(ctx, "killed", time.Minute)
	isDatabaseErr(t, "Acquire on a killed database", err, "killed")
	_, err = d.Claim(ctx, "killed", 1, time.Minute)
	isDatabaseErr(t, "Claim on a killed database", err, "killed")
	isDatabaseErr(t, "Extend on a killed database", l.Extend(ctx, time.Minute), "held")
	isDatabaseErr(t, "Release on a killed database", l.Release(ctx), "held")

	s.Restart()
	p.Reset()
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend after restart: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after restart: %v", err)
	}
}
