package locks_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// recorder is a driver that records what each Acquire's context says about
// waiting, and signals when its first call was refused.
type recorder struct {
	locks.Driver
	mu    sync.Mutex    // protects calls
	calls [][2]bool     // Waiting(ctx) per Acquire
	first chan struct{} // closed once the first call was refused
}

func (r *recorder) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	waiting, waited := locks.Waiting(ctx)
	l, err := r.Driver.Acquire(ctx, key, ttl)
	r.mu.Lock()
	r.calls = append(r.calls, [2]bool{waiting, waited})
	if len(r.calls) == 1 && err != nil {
		close(r.first)
	}
	r.mu.Unlock()
	return l, err
}

// Wait's attempts say they come from a waiting caller, and those after it
// waited say so too; a plain Acquire carries nothing.
func TestWaitTellsTheDriverItWaited(t *testing.T) {
	ctx := context.Background()
	inner := locks.NewInProcessDriver()
	holder, err := inner.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if waiting, waited := locks.Waiting(ctx); waiting || waited {
		t.Fatalf("Waiting(plain ctx) = %v, %v; want false, false", waiting, waited)
	}
	r := &recorder{Driver: inner, first: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		l, err := locks.Wait(ctx, r, "k", time.Minute, locks.WaitOptions{Budget: time.Minute, Step: time.Millisecond})
		if err == nil {
			err = l.Release(ctx)
		}
		done <- err
	}()
	<-r.first
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) < 2 || r.calls[0] != [2]bool{true, false} {
		t.Fatalf("Acquire calls = %v; want the first (waiting, not waited), then more", r.calls)
	}
	for i, c := range r.calls[1:] {
		if c != [2]bool{true, true} {
			t.Fatalf("Acquire call %d after waiting = %v, want (waiting, waited)", i+1, c)
		}
	}
}
