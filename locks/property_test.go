package locks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"pgregory.net/rapid"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

// handle is the model of one acquisition.
type handle struct {
	lease   locks.Lease
	state   int // held, released or lost, as the model sees it
	expires time.Time
	armed   bool // Done was called while the lease was live
}

const (
	modelHeld = iota
	modelReleased
	modelLost
)

// TestInProcessProperties drives the in-process driver with random
// operations on a fake clock and checks every result against a sequential
// model: no two live leases on one key overlap, tokens strictly increase per
// key, and no stale operation changes anything.
func TestInProcessProperties(t *testing.T) {
	ops := 0
	rapid.Check(t, func(rt *rapid.T) {
		fc := clockwork.NewFakeClock()
		d := locks.NewInProcessDriver(locks.WithClock(fc))
		ctx := context.Background()
		keys := []string{"a", "b", "c"}
		holder := map[string]*handle{} // the model's current lease of each key
		lastToken := map[string]uint64{}
		var handles []*handle

		live := func(h *handle) bool {
			return h.state == modelHeld && holder[h.lease.Key()] == h && fc.Now().Before(h.expires)
		}
		ttlGen := rapid.Int64Range(1, 100)

		for range rapid.IntRange(100, 200).Draw(rt, "ops") {
			ops++
			if len(handles) == 0 || rapid.IntRange(0, 4).Draw(rt, "acquire?") == 0 {
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				ttl := time.Duration(ttlGen.Draw(rt, "ttl")) * time.Millisecond
				cur := holder[key]
				busy := cur != nil && live(cur)
				l, err := d.Acquire(ctx, key, ttl)
				switch {
				case busy && !errors.Is(err, locks.ErrNotAcquired):
					rt.Fatalf("Acquire(%s) while held by token %d: %v, %v", key, cur.lease.Token(), l, err)
				case busy:
				case err != nil:
					rt.Fatalf("Acquire(%s) on a free key: %v", key, err)
				case l.Token() <= lastToken[key]:
					rt.Fatalf("Acquire(%s): token %d not above %d", key, l.Token(), lastToken[key])
				default:
					lastToken[key] = l.Token()
					h := &handle{lease: l, expires: fc.Now().Add(ttl)}
					holder[key] = h
					handles = append(handles, h)
				}
				continue
			}
			h := rapid.SampledFrom(handles).Draw(rt, "handle")
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				ttl := time.Duration(ttlGen.Draw(rt, "ttl")) * time.Millisecond
				wasLive := live(h)
				err := h.lease.Extend(ctx, ttl)
				if wasLive != (err == nil) || (!wasLive && !errors.Is(err, locks.ErrLeaseLost)) {
					rt.Fatalf("Extend(token %d) live=%v: %v", h.lease.Token(), wasLive, err)
				}
				if wasLive {
					h.expires = fc.Now().Add(ttl)
				} else if h.state == modelHeld {
					h.state = modelLost // a released lease stays released
				}
			case 1:
				wasLive, wasReleased := live(h), h.state == modelReleased
				err := h.lease.Release(ctx)
				switch {
				case wasReleased || wasLive:
					if err != nil {
						rt.Fatalf("Release(token %d) live=%v released=%v: %v", h.lease.Token(), wasLive, wasReleased, err)
					}
					if wasLive {
						h.state = modelReleased
						delete(holder, h.lease.Key())
					}
				case !errors.Is(err, locks.ErrLeaseLost):
					rt.Fatalf("stale Release(token %d): %v, want ErrLeaseLost", h.lease.Token(), err)
				default:
					h.state = modelLost
				}
				if h.state != modelHeld && lockstest.IsOpen(h.lease.Done()) {
					rt.Fatalf("Done open after Release of token %d", h.lease.Token())
				}
			case 2:
				wasLive := live(h)
				open := lockstest.IsOpen(h.lease.Done())
				if wasLive {
					h.armed = true
				}
				if wasLive && !open {
					rt.Fatalf("Done closed on live token %d", h.lease.Token())
				}
				if !wasLive && !h.armed && open {
					rt.Fatalf("Done open on over token %d", h.lease.Token())
				}
			case 3:
				fc.Advance(time.Duration(rapid.Int64Range(0, 150).Draw(rt, "advance")) * time.Millisecond)
			}
		}
		for _, h := range handles {
			_ = h.lease.Release(ctx) // stop any Done timers
		}
	})
	if ops < 10_000 {
		t.Fatalf("ran %d operations, want at least 10,000", ops)
	}
	t.Logf("%d operations", ops)
}
