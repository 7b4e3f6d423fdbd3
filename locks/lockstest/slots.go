package lockstest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// mustAcquireSlot takes a slot of the semaphore on key of n slots and fails
// t unless it is slot want.
func mustAcquireSlot(t *testing.T, d locks.Driver, key string, n int, ttl time.Duration, c *locks.FireClaim, want int) locks.Lease {
	t.Helper()
	l, err := locks.AcquireSlot(context.Background(), d, key, n, ttl, c)
	if err != nil {
		t.Fatalf("AcquireSlot(%.80q, %d, %v, %+v): %.300v; want slot %d", key, n, ttl, c, err, want)
	}
	if l.Key() != locks.SlotKey(key, want) {
		t.Fatalf("AcquireSlot(%.80q, %d) took a lease on %.80q, want slot %d", key, n, l.Key(), want)
	}
	return l
}

// slotsFull fails t unless AcquireSlot finds all n slots of key held, with
// an error that names the key and n.
func slotsFull(t *testing.T, d locks.Driver, key string, n int) {
	t.Helper()
	l, err := locks.AcquireSlot(context.Background(), d, key, n, long, nil)
	if !errors.Is(err, locks.ErrNotAcquired) || l != nil {
		if l != nil {
			_ = l.Release(context.Background())
		}
		t.Fatalf("AcquireSlot(%q, %d) with every slot held = %v, %v; want ErrNotAcquired", key, n, l, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) || !strings.Contains(err.Error(), fmt.Sprint(n)) {
		t.Errorf("AcquireSlot error %q names neither the key %q nor n %d", err, key, n)
	}
}

// slots checks locks.AcquireSlot without a claim: the slots are taken in
// order, a full semaphore answers ErrNotAcquired, a released or expired
// slot is the next one taken, with a token above its earlier ones, and the
// slots are leases that Acquire sees.
func (s *suite) slots(t *testing.T) {
	d := s.h.NewDriver(t)
	ctx := context.Background()
	key := s.key(t)
	const n = 3
	held := make([]locks.Lease, n+1) // by slot
	for i := 1; i <= n; i++ {
		held[i] = mustAcquireSlot(t, d, key, n, long, nil, i)
		mustBeHeld(t, d, locks.SlotKey(key, i))
	}
	slotsFull(t, d, key, n)
	if l, err := d.Acquire(ctx, key, long); err != nil {
		t.Fatalf("Acquire of the semaphore's own key: %v; a semaphore leases its slot keys only", err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A released slot is the next one taken, under a greater token.
	if err := held[2].Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := mustAcquireSlot(t, d, key, n, long, nil, 2)
	if next.Token() <= held[2].Token() {
		t.Fatalf("slot 2 taken again with token %d, not above its earlier %d", next.Token(), held[2].Token())
	}
	slotsFull(t, d, key, n)

	// An expired slot is free again.
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	short := mustAcquireSlot(t, d, key, n, s.h.TTL, nil, 2)
	if short.Token() <= next.Token() {
		t.Fatalf("slot 2 taken again with token %d, not above its earlier %d", short.Token(), next.Token())
	}
	slotsFull(t, d, key, n)
	s.pastTTL()
	held[2] = mustAcquireSlot(t, d, key, n, long, nil, 2)
	if held[2].Token() <= short.Token() {
		t.Fatalf("slot 2 taken after its lease expired with token %d, not above the expired %d", held[2].Token(), short.Token())
	}
	slotsFull(t, d, key, n)

	// A semaphore of one slot is a lock on its slot key; other semaphores
	// are independent.
	other := s.key(t)
	one := mustAcquireSlot(t, d, other, 1, long, nil, 1)
	slotsFull(t, d, other, 1)
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if err := held[i].Release(ctx); err != nil {
			t.Fatalf("Release of slot %d: %v", i, err)
		}
	}
	for i := 1; i <= n; i++ {
		_ = mustAcquireSlot(t, d, key, n, long, nil, i)
	}
}

// slotsConcurrent: workers on drivers of their own loop taking and giving
// back slots of one semaphore; never more than n are held at once, and each
// slot's tokens strictly increase.
func (s *suite) slotsConcurrent(t *testing.T) {
	key := s.key(t)
	const n, workers, rounds = 3, 16, 20
	drivers := []locks.Driver{s.h.NewDriver(t), s.h.NewDriver(t)}
	var inside, entered, maxInside atomic.Int64
	var mu sync.Mutex
	last := map[string]uint64{} // the last token of each slot
	var wg sync.WaitGroup
	for w := range workers {
		d := drivers[w%len(drivers)]
		wg.Go(func() {
			ctx := context.Background()
			for range rounds {
				l, err := locks.AcquireSlot(ctx, d, key, n, long, nil)
				if errors.Is(err, locks.ErrNotAcquired) {
					runtime.Gosched()
					continue
				}
				if err != nil {
					t.Errorf("AcquireSlot: %v", err)
					return
				}
				entered.Add(1)
				in := inside.Add(1)
				for m := maxInside.Load(); in > m && !maxInside.CompareAndSwap(m, in); m = maxInside.Load() {
				}
				mu.Lock()
				prev, seen := last[l.Key()]
				last[l.Key()] = l.Token()
				mu.Unlock()
				if seen && l.Token() <= prev {
					t.Errorf("slot %q taken with token %d after token %d", l.Key(), l.Token(), prev)
				}
				runtime.Gosched() // let the others find this slot held
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release of %q: %v", l.Key(), err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := maxInside.Load(); m > n {
		t.Fatalf("%d slots of %d held at once", m, n)
	}
	if entered.Load() == 0 {
		t.Fatal("no worker ever took a slot")
	}
	for k := range last {
		found := false
		for i := 1; i <= n; i++ {
			found = found || k == locks.SlotKey(key, i)
		}
		if !found {
			t.Errorf("a worker took %q, not a slot of the semaphore on %q of %d slots", k, key, n)
		}
	}
}

// slotsClaim checks locks.AcquireSlot with a claim: the claim is made with
// the first free slot and takes no other; a second call with the same claim,
// from another node, is ErrClaimed and takes no slot; the next seq takes
// the next free slot; of callers racing for one fire, one takes a slot.
func (s *suite) slotsClaim(t *testing.T) {
	d, other := s.h.NewDriver(t), s.h.NewDriver(t)
	ctx := context.Background()
	key, ck := s.key(t), s.key(t)
	const n = 3
	claim := func(seq int64) *locks.FireClaim { return &locks.FireClaim{Key: ck, Seq: seq, TTL: long} }

	first := mustAcquireSlot(t, d, key, n, long, claim(100), 1)
	if l, err := locks.AcquireSlot(ctx, other, key, n, long, claim(100)); !errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireSlot with a claim of 100 taken = %v, %v; want ErrClaimed", l, err)
	} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Errorf("AcquireSlot error %q does not name the key %q", err, key)
	}
	// Neither the first call nor the refused one took another slot.
	second := mustAcquireSlot(t, d, key, n, long, nil, 2)
	third := mustAcquireSlot(t, d, key, n, long, nil, 3)
	slotsFull(t, d, key, n)
	for _, l := range []locks.Lease{second, third} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The next fire takes the next free slot, and only that one.
	next := mustAcquireSlot(t, other, key, n, long, claim(101), 2)
	if c, ok := locks.As[locks.Claimer](d); ok {
		if got, err := c.Claim(ctx, ck, 101, long); got || err != nil {
			t.Fatalf("Claim(101) after AcquireSlot claimed 101 = %v, %v; want false", got, err)
		}
	}
	third = mustAcquireSlot(t, d, key, n, long, nil, 3)
	// All slots held: the claim of a fire is not recorded.
	if l, err := locks.AcquireSlot(ctx, d, key, n, long, claim(102)); !errors.Is(err, locks.ErrNotAcquired) || l != nil {
		t.Fatalf("AcquireSlot(seq 102) with every slot held = %v, %v; want ErrNotAcquired", l, err)
	}
	if err := third.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_ = mustAcquireSlot(t, d, key, n, long, claim(102), 3)
	for _, l := range []locks.Lease{first, next} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Racing callers for one fire, on drivers of their own: one slot taken.
	race := s.key(t)
	const racers = 8
	leases := make(chan locks.Lease, racers)
	var wg sync.WaitGroup
	for range racers {
		d := s.h.NewDriver(t)
		wg.Go(func() {
			l, err := locks.AcquireSlot(ctx, d, race, n, long, claim(200))
			switch {
			case err == nil:
				leases <- l
			case !errors.Is(err, locks.ErrClaimed) && !errors.Is(err, locks.ErrNotAcquired):
				t.Errorf("racing AcquireSlot: %v", err)
			}
		})
	}
	wg.Wait()
	close(leases)
	won := 0
	for l := range leases {
		won++
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing callers took a slot for one fire, want 1", won, racers)
	}
	for i := 1; i <= n; i++ { // the losers gave back what they took
		_ = mustAcquireSlot(t, d, race, n, long, nil, i)
	}
}

// slotsBadInput: AcquireSlot refuses bad input with ErrInvalid, in an error
// that names the value, and takes nothing; the longest slot key is the one
// checked against locks.MaxKeyLen.
func (s *suite) slotsBadInput(t *testing.T) {
	d := s.h.NewDriver(t)
	ctx := context.Background()
	key := s.key(t)
	fits := s.longKey(t, locks.MaxKeyLen-2) // SlotKey(fits, 9) is MaxKeyLen bytes long
	good := &locks.FireClaim{Key: s.key(t), Seq: 1, TTL: long}
	for _, bad := range []struct {
		name string
		key  string
		n    int
		ttl  time.Duration
		c    *locks.FireClaim
		says string
	}{
		{"no slots", key, 0, long, nil, "n 0 "},
		{"negative n", key, -1, long, nil, "n -1 "},
		{"too many slots", key, locks.MaxSlots + 1, long, nil, fmt.Sprintf("n %d ", locks.MaxSlots+1)},
		{"empty key", "", 3, long, nil, `key "" must not be empty`},
		{"slot key too long", fits, 10, long, nil, fmt.Sprintf("is %d bytes long", locks.MaxKeyLen+1)},
		{"zero ttl", key, 3, 0, nil, "ttl 0s"},
		{"ttl above MaxTTL", key, 3, locks.MaxTTL + 1, nil, "must not exceed locks.MaxTTL"},
		{"EvenIfHeld", key, 3, long, &locks.FireClaim{Key: good.Key, Seq: 1, TTL: long, EvenIfHeld: true}, "EvenIfHeld"},
		{"empty claim key", key, 3, long, &locks.FireClaim{Key: "", Seq: 1, TTL: long}, `key "" must not be empty`},
		{"negative seq", key, 3, long, &locks.FireClaim{Key: good.Key, Seq: -1, TTL: long}, "seq -1"},
		{"zero claim ttl", key, 3, long, &locks.FireClaim{Key: good.Key, Seq: 1, TTL: 0}, "ttl 0s"},
	} {
		l, err := locks.AcquireSlot(ctx, d, bad.key, bad.n, bad.ttl, bad.c)
		if !errors.Is(err, locks.ErrInvalid) || l != nil {
			t.Errorf("%s: AcquireSlot(n %d, ttl %v, %+v) = %v, %.300v; want ErrInvalid", bad.name, bad.n, bad.ttl, bad.c, l, err)
			continue
		}
		if !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: AcquireSlot error %.300q does not say %q", bad.name, err, bad.says)
		}
		if len(err.Error()) > 1024 {
			t.Errorf("%s: the error is %d bytes long; want the key's start only", bad.name, len(err.Error()))
		}
	}
	var nilCtx context.Context
	if l, err := locks.AcquireSlot(nilCtx, d, key, 3, long, nil); !errors.Is(err, locks.ErrInvalid) || l != nil {
		t.Errorf("AcquireSlot(nil ctx) = %v, %v; want ErrInvalid", l, err)
	}
	if l, err := locks.AcquireSlot(ctx, nil, key, 3, long, nil); !errors.Is(err, locks.ErrInvalid) || l != nil {
		t.Errorf("AcquireSlot(nil driver) = %v, %v; want ErrInvalid", l, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if l, err := locks.AcquireSlot(cancelled, d, key, 3, long, good); !errors.Is(err, context.Canceled) || l != nil {
		t.Errorf("AcquireSlot(cancelled ctx) = %v, %v; want context.Canceled", l, err)
	}
	// Bad input took nothing, and its claim was not recorded.
	_ = mustAcquireSlot(t, d, key, 3, long, good, 1)
	// The longest slot key that fits is taken like any other.
	l := mustAcquireSlot(t, d, fits, 9, long, nil, 1)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release of a slot of a key of MaxKeyLen-2 bytes: %.300v", err)
	}
	// The most slots a semaphore may have.
	wide := s.key(t)
	for i := 1; i <= locks.MaxSlots; i++ {
		_ = mustAcquireSlot(t, d, wide, locks.MaxSlots, long, nil, i)
	}
	slotsFull(t, d, wide, locks.MaxSlots)
}
