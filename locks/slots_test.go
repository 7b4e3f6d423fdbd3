package locks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

func TestSlotKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		i    int
		want string
	}{{"jobs", 1, "jobs#1"}, {"jobs", 64, "jobs#64"}, {"a#1", 2, "a#1#2"}, {"ü", 10, "ü#10"}} {
		if got := locks.SlotKey(c.key, c.i); got != c.want {
			t.Errorf("SlotKey(%q, %d) = %q, want %q", c.key, c.i, got, c.want)
		}
	}
}

// twoStep is a Claimer that is not a ClaimAcquirer: the in-process driver
// seen through its Acquire, Claim and membership only, so that AcquireClaim
// and AcquireSlot take their two-step, slot-by-slot paths. It records the
// keys it was asked to acquire, and fails those in fail as a backend would.
type twoStep struct {
	locks.Driver
	locks.Claimer
	locks.Membership

	mu    sync.Mutex
	tried []string
	fail  map[string]bool
}

var errBackend = errors.New("backend down")

func newTwoStep(d *locks.InProcessDriver) *twoStep {
	return &twoStep{Driver: d, Claimer: d, Membership: d, fail: map[string]bool{}}
}

func (w *twoStep) Unwrap() locks.Driver { return w.Driver }

func (w *twoStep) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	w.mu.Lock()
	w.tried = append(w.tried, key)
	fail := w.fail[key]
	w.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("acquiring %q: %w", key, errBackend)
	}
	return w.Driver.Acquire(ctx, key, ttl)
}

// take returns the keys tried since the last call.
func (w *twoStep) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	tried := w.tried
	w.tried = nil
	return tried
}

var _ locks.Claimer = (*twoStep)(nil)

// The whole suite, AcquireSlot's cases included, holds for a driver that
// claims in two steps.
func TestTwoStepConformance(t *testing.T) {
	fc := clockwork.NewFakeClock()
	d := newTwoStep(locks.NewInProcessDriver(locks.WithClock(fc)))
	if _, ok := any(d).(locks.ClaimAcquirer); ok {
		t.Fatal("twoStep is a ClaimAcquirer")
	}
	lockstest.Run(t, lockstest.Harness{
		NewDriver: func(*testing.T) locks.Driver { return d },
		Clock:     fc,
		NewDrivers: func(*testing.T) lockstest.Drivers {
			return lockstest.Drivers{A: d, B: d, Loss: lockstest.NoWire}
		},
	})
}

func slotKeys(key string, slots ...int) []string {
	keys := make([]string, len(slots))
	for i, s := range slots {
		keys[i] = locks.SlotKey(key, s)
	}
	return keys
}

// Without a ClaimAcquirer, AcquireSlot goes slot by slot and stops at the
// first slot acquired or the first claim refused; a slot whose backend
// fails is passed over.
func TestAcquireSlotSlotBySlot(t *testing.T) {
	ctx := context.Background()
	w := newTwoStep(locks.NewInProcessDriver(locks.WithClock(clockwork.NewFakeClock())))
	claim := func(seq int64) *locks.FireClaim {
		return &locks.FireClaim{Key: "jobs-fire", Seq: seq, TTL: time.Minute}
	}
	tried := func(what string, want ...string) {
		t.Helper()
		if got := w.take(); !slices.Equal(got, want) {
			t.Fatalf("%s: Acquire of %q, want %q", what, got, want)
		}
	}

	first, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, claim(100))
	if err != nil || first.Key() != "jobs#1" {
		t.Fatalf("AcquireSlot(seq 100) = %v, %v; want slot 1", first, err)
	}
	tried("first fire", "jobs#1")

	l, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, claim(100))
	if !errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireSlot(seq 100) again = %v, %v; want ErrClaimed", l, err)
	}
	if want := `locks: semaphore "jobs" of 3 slots, slot 2: locks: already claimed: claim "jobs-fire" of 100`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	tried("refused fire", "jobs#1", "jobs#2") // slot 2 acquired, given back; slot 3 not tried

	next, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, claim(101))
	if err != nil || next.Key() != "jobs#2" {
		t.Fatalf("AcquireSlot(seq 101) = %v, %v; want slot 2", next, err)
	}
	tried("next fire", "jobs#1", "jobs#2")

	// The backend of slot 3 fails: the semaphore is full as far as can be
	// told, and the failure is the answer.
	w.fail["jobs#3"] = true
	if l, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, nil); !errors.Is(err, errBackend) || errors.Is(err, locks.ErrNotAcquired) || l != nil {
		t.Fatalf("AcquireSlot with slot 3 failing = %v, %v; want the backend error", l, err)
	}
	tried("slot 3 failing", slotKeys("jobs", 1, 2, 3)...)
	// The backend of slot 1 fails: slot 3 is taken.
	w.fail = map[string]bool{"jobs#1": true}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, claim(102))
	if err != nil || third.Key() != "jobs#3" {
		t.Fatalf("AcquireSlot with slot 1 failing = %v, %v; want slot 3", third, err)
	}
	tried("slot 1 failing", slotKeys("jobs", 1, 2, 3)...)
	// A backend failure before a refused claim is the answer: the failed
	// slot may have taken the claim that the later one found.
	w.fail = map[string]bool{"jobs#1": true}
	if err := third.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, claim(102)); !errors.Is(err, errBackend) || errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireSlot with slot 1 failing, 102 claimed = %v, %v; want the backend error", l, err)
	}
	tried("slot 1 failing, claimed", slotKeys("jobs", 1, 2, 3)...)
	w.fail = map[string]bool{}

	// Slot 1 and 3 free: the first is taken, then the other.
	if l, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, nil); err != nil || l.Key() != "jobs#1" {
		t.Fatalf("AcquireSlot = %v, %v; want slot 1", l, err)
	}
	tried("slot 1 free", "jobs#1")
	if l, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, nil); err != nil || l.Key() != "jobs#3" {
		t.Fatalf("AcquireSlot = %v, %v; want slot 3", l, err)
	}
	tried("slot 3 free", slotKeys("jobs", 1, 2, 3)...)
	// All held: every slot tried.
	if l, err := locks.AcquireSlot(ctx, w, "jobs", 3, time.Minute, nil); !errors.Is(err, locks.ErrNotAcquired) || l != nil {
		t.Fatalf("AcquireSlot with every slot held = %v, %v; want ErrNotAcquired", l, err)
	} else if want := `locks: not acquired: semaphore "jobs" of 3 slots: all held`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	tried("every slot held", slotKeys("jobs", 1, 2, 3)...)

	// A cancelled context stops at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := locks.AcquireSlot(cctx, w, "other", 3, time.Minute, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireSlot(cancelled) = %v, want context.Canceled", err)
	}
	tried("cancelled")
}

// plain is a Driver and nothing else: it keeps no claims.
type plain struct{ d locks.Driver }

func (p plain) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	return p.d.Acquire(ctx, key, ttl)
}

func TestAcquireSlotWithoutClaimer(t *testing.T) {
	ctx := context.Background()
	d := plain{locks.NewInProcessDriver(locks.WithClock(clockwork.NewFakeClock()))}
	if l, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, nil); err != nil || l.Key() != "jobs#1" {
		t.Fatalf("AcquireSlot without a claim = %v, %v; want slot 1", l, err)
	}
	l, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, &locks.FireClaim{Key: "c", Seq: 1, TTL: time.Minute})
	if !errors.Is(err, locks.ErrInvalid) || l != nil || !strings.Contains(err.Error(), "keeps no claims") {
		t.Fatalf("AcquireSlot with a claim on a driver without claims = %v, %v; want ErrInvalid", l, err)
	}
	if l, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, nil); err != nil || l.Key() != "jobs#2" {
		t.Fatalf("AcquireSlot after the refused call = %v, %v; want slot 2", l, err)
	}
}

// counting is a ClaimAcquirer that counts its calls and delegates them to
// the in-process driver.
type counting struct {
	*locks.InProcessDriver
	acquires, calls atomic.Int32
	mu              sync.Mutex
	fires           [][]locks.FireLock
}

func (c *counting) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	c.acquires.Add(1)
	return c.InProcessDriver.Acquire(ctx, key, ttl)
}

func (c *counting) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	c.calls.Add(1)
	c.mu.Lock()
	c.fires = append(c.fires, slices.Clone(fires))
	c.mu.Unlock()
	return c.InProcessDriver.AcquireClaims(ctx, fires)
}

// On a ClaimAcquirer, a claimed AcquireSlot is one AcquireClaims call of
// every slot, in order, with the same claim.
func TestAcquireSlotOneCall(t *testing.T) {
	ctx := context.Background()
	d := &counting{InProcessDriver: locks.NewInProcessDriver(locks.WithClock(clockwork.NewFakeClock()))}
	c := locks.FireClaim{Key: "jobs-fire", Seq: 100, TTL: time.Minute}
	calls := func(what string, acquires, calls int32) {
		t.Helper()
		if a, c := d.acquires.Swap(0), d.calls.Swap(0); a != acquires || c != calls {
			t.Fatalf("%s: %d Acquire and %d AcquireClaims calls, want %d and %d", what, a, c, acquires, calls)
		}
	}
	first, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, &c)
	if err != nil || first.Key() != "jobs#1" {
		t.Fatalf("AcquireSlot(seq 100) = %v, %v; want slot 1", first, err)
	}
	calls("first fire", 0, 1)
	want := make([]locks.FireLock, 3)
	for i := range want {
		want[i] = locks.FireLock{Key: locks.SlotKey("jobs", i+1), TTL: time.Minute, Claim: c}
	}
	if !slices.Equal(d.fires[0], want) {
		t.Fatalf("AcquireClaims(%+v), want %+v", d.fires[0], want)
	}
	if l, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, &c); !errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireSlot(seq 100) again = %v, %v; want ErrClaimed", l, err)
	}
	calls("refused fire", 0, 1)
	c.Seq = 101
	next, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, &c)
	if err != nil || next.Key() != "jobs#2" {
		t.Fatalf("AcquireSlot(seq 101) = %v, %v; want slot 2", next, err)
	}
	calls("next fire", 0, 1)
	// Slot 3 was found with the claim taken: it is free.
	third, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, nil)
	if err != nil || third.Key() != "jobs#3" {
		t.Fatalf("AcquireSlot without a claim = %v, %v; want slot 3", third, err)
	}
	calls("no claim", 3, 0) // without a claim: Acquire, slot by slot
	c.Seq = 102
	if l, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, &c); !errors.Is(err, locks.ErrNotAcquired) || l != nil {
		t.Fatalf("AcquireSlot(seq 102) with every slot held = %v, %v; want ErrNotAcquired", l, err)
	}
	calls("every slot held", 0, 1)
	// Bad input makes no call.
	c.EvenIfHeld = true
	if _, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, &c); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("AcquireSlot(EvenIfHeld) = %v, want ErrInvalid", err)
	}
	calls("bad input", 0, 0)
}

// scripted is a ClaimAcquirer whose AcquireClaims answers what it is told,
// to check how AcquireSlot reads the results of its slots.
type scripted struct {
	locks.Driver
	answer []locks.FireLease
}

func (s *scripted) Claim(context.Context, string, int64, time.Duration) (bool, error) {
	return false, errors.New("scripted: no Claim")
}

func (s *scripted) AcquireClaims(context.Context, []locks.FireLock) []locks.FireLease {
	return s.answer
}

// fakeLease is a lease that knows whether it was released.
type fakeLease struct {
	key      string
	released atomic.Int32
}

func (l *fakeLease) Key() string                                 { return l.key }
func (l *fakeLease) Token() uint64                               { return 1 }
func (l *fakeLease) Extend(context.Context, time.Duration) error { return nil }
func (l *fakeLease) Release(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	l.released.Add(1)
	return nil
}
func (l *fakeLease) Done() <-chan struct{} { return nil }

func TestAcquireSlotReadsResults(t *testing.T) {
	held := locks.FireLease{Err: fmt.Errorf("%w: held", locks.ErrNotAcquired)}
	claimed := locks.FireLease{Err: fmt.Errorf("%w: taken", locks.ErrClaimed)}
	backend := locks.FireLease{Err: errBackend}
	none := locks.FireLease{}
	for _, c := range []struct {
		name   string
		answer []locks.FireLease
		leases []int // the slots (from 1) answered with a lease
		want   int   // the slot of the lease returned, or 0
		err    error
		says   string
		kept   []int // the leases not released
	}{
		{name: "first free", answer: []locks.FireLease{held, {}, claimed}, leases: []int{2}, want: 2, kept: []int{2}},
		{name: "claim refused", answer: []locks.FireLease{held, claimed, held}, err: locks.ErrClaimed, says: "slot 2"},
		{name: "all held", answer: []locks.FireLease{held, held, held}, err: locks.ErrNotAcquired, says: "all held"},
		{name: "backend then claimed", answer: []locks.FireLease{backend, claimed, held}, err: errBackend, says: "slot 1"},
		{name: "claimed then backend", answer: []locks.FireLease{held, claimed, backend}, err: locks.ErrClaimed, says: "slot 2"},
		{name: "held then backend", answer: []locks.FireLease{held, held, backend}, err: errBackend, says: "slot 3"},
		{name: "backend then lease", answer: []locks.FireLease{backend, {}, claimed}, leases: []int{2}, want: 2, kept: []int{2}},
		{name: "two leases", answer: []locks.FireLease{held, {}, {}}, leases: []int{2, 3}, want: 2, kept: []int{2}},
		{name: "lease with an error", answer: []locks.FireLease{{Err: errBackend}, held, held}, leases: []int{1}, err: errBackend, says: "slot 1"},
		{name: "neither lease nor error", answer: []locks.FireLease{held, none, held}, err: nil, says: "neither a lease nor an error"},
		{name: "too few results", answer: []locks.FireLease{held, {}}, leases: []int{2}, says: "answered 2 results for 3 slots"},
	} {
		t.Run(c.name, func(t *testing.T) {
			answer := slices.Clone(c.answer)
			fakes := map[int]*fakeLease{}
			for _, s := range c.leases {
				fakes[s] = &fakeLease{key: locks.SlotKey("jobs", s)}
				answer[s-1].Lease = fakes[s]
			}
			d := &scripted{Driver: plain{locks.NewInProcessDriver()}, answer: answer}
			l, err := locks.AcquireSlot(context.Background(), d, "jobs", 3, time.Minute, &locks.FireClaim{Key: "c", Seq: 1, TTL: time.Minute})
			if c.want != 0 {
				if err != nil || l == nil || l.Key() != locks.SlotKey("jobs", c.want) {
					t.Fatalf("AcquireSlot = %v, %v; want slot %d", l, err, c.want)
				}
			} else {
				if l != nil || err == nil || (c.err != nil && !errors.Is(err, c.err)) {
					t.Fatalf("AcquireSlot = %v, %v; want %v", l, err, c.err)
				}
				if c.err != locks.ErrNotAcquired && errors.Is(err, locks.ErrNotAcquired) {
					t.Errorf("error %q wraps ErrNotAcquired", err)
				}
				if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), `semaphore "jobs" of 3 slots`) {
					t.Errorf("error %q does not name the semaphore and say %q", err, c.says)
				}
			}
			for s, f := range fakes {
				kept := slices.Contains(c.kept, s)
				if got := f.released.Load(); kept && got != 0 || !kept && got != 1 {
					t.Errorf("lease of slot %d released %d times, want %v", s, got, map[bool]int{true: 0, false: 1}[kept])
				}
			}
		})
	}
}

func TestAcquireSlotBadInput(t *testing.T) {
	ctx := context.Background()
	d := locks.NewInProcessDriver(locks.WithClock(clockwork.NewFakeClock()))
	long := strings.Repeat("k", locks.MaxKeyLen-1)
	for _, c := range []struct {
		key  string
		n    int
		ttl  time.Duration
		fc   *locks.FireClaim
		want string
	}{
		{"jobs", 0, time.Minute, nil, `locks: invalid argument: semaphore "jobs" of 0 slots: n 0 must be in [1, locks.MaxSlots (64)]`},
		{"jobs", 65, time.Minute, nil, `locks: invalid argument: semaphore "jobs" of 65 slots: n 65 must be in [1, locks.MaxSlots (64)]`},
		{"", 3, time.Minute, nil, `locks: invalid argument: semaphore "" of 3 slots: key "" must not be empty`},
		{long, 1, time.Minute, nil, fmt.Sprintf(`locks: semaphore %q… of 1 slots: locks: invalid argument: key %q… is %d bytes long, the limit is locks.MaxKeyLen (%d bytes)`,
			long[:64], long[:64], locks.MaxKeyLen+1, locks.MaxKeyLen)},
		{"jobs", 3, 0, nil, `locks: semaphore "jobs" of 3 slots: locks: invalid argument: ttl 0s for key "jobs#3" must be positive`},
		{"jobs", 3, time.Minute, &locks.FireClaim{Key: "c", Seq: 7, TTL: time.Minute, EvenIfHeld: true},
			`locks: invalid argument: semaphore "jobs" of 3 slots: claim "c" of 7: EvenIfHeld is not supported for slots (a waiter would not know which slot to wait for)`},
		{"jobs", 3, time.Minute, &locks.FireClaim{Key: "c", Seq: -1, TTL: time.Minute},
			`locks: semaphore "jobs" of 3 slots: locks: invalid argument: claim seq -1 for key "c" must be in [0, 9007199254740991]`},
	} {
		l, err := locks.AcquireSlot(ctx, d, c.key, c.n, c.ttl, c.fc)
		if !errors.Is(err, locks.ErrInvalid) || l != nil || err.Error() != c.want {
			t.Errorf("AcquireSlot(%.20q, %d, %v, %+v) = %v, %.300v; want ErrInvalid %q", c.key, c.n, c.ttl, c.fc, l, err, c.want)
		}
	}
	if _, err := locks.AcquireSlot(ctx, nil, "jobs", 3, time.Minute, nil); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("AcquireSlot(nil driver) = %v, want ErrInvalid", err)
	}
	// Every slot is free: bad input took nothing.
	for i := 1; i <= 3; i++ {
		if l, err := locks.AcquireSlot(ctx, d, "jobs", 3, time.Minute, &locks.FireClaim{Key: "c", Seq: int64(i), TTL: time.Minute}); err != nil || l.Key() != locks.SlotKey("jobs", i) {
			t.Fatalf("AcquireSlot %d = %v, %v; want slot %d", i, l, err, i)
		}
	}
}

// A slot's lease expires as any lease does, and its slot is the next one
// taken.
func TestAcquireSlotExpiry(t *testing.T) {
	fc := clockwork.NewFakeClock()
	d := locks.NewInProcessDriver(locks.WithClock(fc))
	ctx := context.Background()
	short, err := locks.AcquireSlot(ctx, d, "jobs", 2, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locks.AcquireSlot(ctx, d, "jobs", 2, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	l, err := locks.AcquireSlot(ctx, d, "jobs", 2, time.Hour, nil)
	if err != nil || l.Key() != short.Key() || l.Token() <= short.Token() {
		t.Fatalf("AcquireSlot after slot 1 expired = %v, %v; want slot 1 under a greater token than %d", l, err, short.Token())
	}
	if err := short.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Release of the expired slot = %v, want ErrLeaseLost", err)
	}
}
