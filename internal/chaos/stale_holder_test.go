package chaos

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// The fence at its source: a holder whose own clock missed its pause (its
// driver runs on a fake clock that never advances, so its local deadline
// never passes) is refused by Redis itself once a successor holds the key.
// Its Extend and Release return ErrLeaseLost from Redis and change nothing,
// its run context is then cancelled with cause ErrLeaseLost, its fenced
// write is rejected, and the successor's lease and write are untouched.
func TestStaleHolderRefusedByRedis(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	stale, err := redislocks.New(redislocks.Options{Client: srv.Client(), Namespace: "stale", Clock: clockwork.NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := redislocks.New(redislocks.Options{Client: srv.Client(), Namespace: "stale"})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	old, err := stale.Acquire(ctx, "job", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := locks.WithLease(ctx, old)
	defer cancel()
	ledger := srv.Client()
	if err := appendLedger(ctx, ledger, old.Token(), "start old"); err != nil {
		t.Fatal(err)
	}

	// The holder "pauses": Redis expires its key and the successor, which
	// waits for it, takes over.
	succ, err := locks.Wait(ctx, fresh, "job", time.Minute, locks.WaitOptions{Budget: 5 * time.Second, Step: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("successor: %v", err)
	}
	if succ.Token() <= old.Token() {
		t.Fatalf("successor token %d not above %d", succ.Token(), old.Token())
	}
	if err := appendLedger(ctx, ledger, succ.Token(), "start succ"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-runCtx.Done():
		t.Fatal("the stale holder's context ended before it learned anything: its clock was meant to miss the pause")
	default:
	}

	if err := old.Extend(ctx, time.Minute); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("stale Extend = %v, want ErrLeaseLost", err)
	}
	select {
	case <-runCtx.Done():
		if cause := context.Cause(runCtx); !errors.Is(cause, locks.ErrLeaseLost) {
			t.Errorf("stale run context cause = %v, want ErrLeaseLost", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stale holder's run context was not cancelled after Extend found the lease lost")
	}
	if err := old.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("stale Release = %v, want ErrLeaseLost", err)
	}
	if err := appendLedger(ctx, ledger, old.Token(), "end old"); !errors.Is(err, errStale) {
		t.Fatalf("stale ledger write = %v, want it rejected", err)
	}
	if err := succ.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("successor's Extend after the stale holder's calls: %v", err)
	}
	if err := appendLedger(ctx, ledger, succ.Token(), "end succ"); err != nil {
		t.Fatalf("successor's write: %v", err)
	}
	entries, err := ledger.LRange(ctx, ledgerKeys[0], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start old", "start succ", "end succ"}; !slices.Equal(entries, want) {
		t.Fatalf("ledger = %q, want %q", entries, want)
	}
	if err := succ.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
