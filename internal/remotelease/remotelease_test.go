package remotelease

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/drift"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errServer = errors.New("server: outcome unknown")

// answer is what a fake server says to one Extend or Release.
type answer int

const (
	yes     answer = iota // the lease holds (held) its key
	no                    // it does not
	unknown               // the call failed: outcome unknown
)

func (a answer) call(calls *int) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		*calls++
		if a == unknown {
			return false, errServer
		}
		return a == yes, nil
	}
}

// TestLeaseAgainstModel drives a lease through seeded random histories of
// clock advances, Extends and Releases with every server answer, and checks
// each step against a model of its contract: Done is closed exactly when
// the lease is released, lost or past its deadline (sent + ttl - margin of
// the last successful acquisition or Extend); a lease known to be over
// makes no round trip, except a Release past the deadline; an Extend of
// unknown outcome keeps the earlier of the deadline it had and the one it
// asked for (the server may have applied it or not), and changes nothing
// else locally.
func TestLeaseAgainstModel(t *testing.T) {
	margin := drift.New(0.01, 2*time.Millisecond)
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		fc := clockwork.NewFakeClock()
		ttl := time.Duration(1+rng.IntN(1000)) * time.Millisecond * 10
		l := New("test", "k", 7, fc, margin, fc.Now(), ttl)
		var done <-chan struct{}
		if rng.IntN(2) == 0 {
			done = l.Done() // armed from the start; otherwise taken later
		}
		const (
			held = iota
			released
			lost
		)
		state, deadline := held, fc.Now().Add(ttl-margin.Of(ttl))
		for step := range 40 {
			var calls int
			a := answer(rng.IntN(3))
			switch op := rng.IntN(4); op {
			case 0:
				fc.Advance(time.Duration(rng.Int64N(int64(ttl))))
			case 1:
				nttl := time.Duration(1+rng.IntN(1000)) * time.Millisecond * 10
				sent := fc.Now()
				err := l.ExtendWith(context.Background(), nttl, a.call(&calls))
				live := state == held && sent.Before(deadline)
				switch {
				case !live:
					if calls != 0 || !errors.Is(err, locks.ErrLeaseLost) {
						t.Fatalf("seed %d step %d: Extend of an over lease: %v after %d calls, want ErrLeaseLost without a call", seed, step, err, calls)
					}
					if state == held {
						state = lost
					}
				case a == unknown:
					if !errors.Is(err, errServer) {
						t.Fatalf("seed %d step %d: Extend with unknown outcome: %v", seed, step, err)
					}
					if d := sent.Add(nttl - margin.Of(nttl)); d.Before(deadline) {
						deadline = d
					}
				case a == no:
					if !errors.Is(err, locks.ErrLeaseLost) {
						t.Fatalf("seed %d step %d: Extend refused by the server: %v, want ErrLeaseLost", seed, step, err)
					}
					state = lost
				default:
					if err != nil {
						t.Fatalf("seed %d step %d: Extend: %v", seed, step, err)
					}
					deadline = sent.Add(nttl - margin.Of(nttl))
				}
			case 2:
				err := l.ReleaseWith(context.Background(), a.call(&calls))
				switch {
				case state == released:
					if calls != 0 || err != nil {
						t.Fatalf("seed %d step %d: second Release: %v after %d calls, want nil without a call", seed, step, err, calls)
					}
				case state == lost:
					if calls != 0 || !errors.Is(err, locks.ErrLeaseLost) {
						t.Fatalf("seed %d step %d: Release of a lost lease: %v after %d calls, want ErrLeaseLost without a call", seed, step, err, calls)
					}
				case calls != 1:
					t.Fatalf("seed %d step %d: Release of a held lease made %d calls, want 1 (even past its deadline)", seed, step, calls)
				case a == unknown:
					if !errors.Is(err, errServer) {
						t.Fatalf("seed %d step %d: Release with unknown outcome: %v", seed, step, err)
					}
				case a == no:
					if !errors.Is(err, locks.ErrLeaseLost) {
						t.Fatalf("seed %d step %d: Release refused: %v, want ErrLeaseLost", seed, step, err)
					}
					state = lost
				default:
					if err != nil {
						t.Fatalf("seed %d step %d: Release: %v", seed, step, err)
					}
					state = released
				}
			case 3:
				if done == nil {
					done = l.Done()
				}
			}
			if done == nil {
				continue
			}
			if state == held && fc.Now().Before(deadline) {
				if !lockstest.IsOpen(done) {
					t.Fatalf("seed %d step %d: Done closed while held, %v before the deadline", seed, step, deadline.Sub(fc.Now()))
				}
			} else {
				lockstest.Closes(t, done, "Done of a lease released, lost or past its deadline")
			}
		}
	}
}

// TestLoseAndLive: Live refuses a lease past its deadline and marks it
// lost; Lose is final for a held lease and leaves a released one released.
func TestLoseAndLive(t *testing.T) {
	fc := clockwork.NewFakeClock()
	m := drift.New(0.01, 2*time.Millisecond)
	l := New("test", "k", 1, fc, m, fc.Now(), time.Second)
	if err := l.Live(fc.Now()); err != nil {
		t.Fatalf("Live at acquisition: %v", err)
	}
	if err := l.Live(fc.Now().Add(time.Second - m.Of(time.Second))); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Live at the deadline: %v, want ErrLeaseLost", err)
	}
	var calls int
	if err := l.ReleaseWith(context.Background(), yes.call(&calls)); !errors.Is(err, locks.ErrLeaseLost) || calls != 0 {
		t.Fatalf("Release after Live found it over: %v after %d calls, want ErrLeaseLost without a call", err, calls)
	}

	r := New("test", "k", 2, fc, m, fc.Now(), time.Second)
	if err := r.ReleaseWith(context.Background(), yes.call(&calls)); err != nil {
		t.Fatal(err)
	}
	if err := r.Lose(); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Lose: %v", err)
	}
	if err := r.ReleaseWith(context.Background(), yes.call(&calls)); err != nil {
		t.Fatalf("Release of a released lease after Lose: %v, want nil: released is final", err)
	}
}
