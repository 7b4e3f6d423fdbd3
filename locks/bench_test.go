package locks_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// mapTable is the baseline: a map plus a sync.Mutex doing the bookkeeping
// the lease contract needs (per key the holder's token and expiry; a release
// must match the token and be unexpired), with no lease handle, no Done and
// no waiters.
type mapTable struct {
	mu      sync.Mutex
	last    uint64
	holders map[string]mapEntry
}

type mapEntry struct {
	token   uint64
	expires time.Time
}

func (m *mapTable) acquire(key string, ttl time.Duration) (uint64, bool) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.holders[key]; ok && now.Before(e.expires) {
		return 0, false
	}
	m.last++
	m.holders[key] = mapEntry{m.last, now.Add(ttl)}
	return m.last, true
}

func (m *mapTable) release(key string, token uint64) bool {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.holders[key]; !ok || e.token != token || !now.Before(e.expires) {
		return false
	}
	delete(m.holders, key)
	return true
}

// leanTable is the leanest table a single-process lock can be: a map and a
// sync.Mutex, one monotonic clock read per cycle (the expiry set on
// acquire), a release that checks the token only, and no lease handle,
// Done or waiters. It answers less than the lease contract asks (a release
// after expiry succeeds), and is the floor the driver is measured against.
type leanTable struct {
	mu      sync.Mutex
	base    time.Time
	last    uint64
	holders map[string]leanEntry
}

type leanEntry struct {
	token   uint64
	expires time.Duration // since base
}

func (m *leanTable) acquire(key string, ttl time.Duration) (uint64, bool) {
	now := time.Since(m.base)
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.holders[key]; ok && now < e.expires {
		return 0, false
	}
	m.last++
	m.holders[key] = leanEntry{m.last, now + ttl}
	return m.last, true
}

func (m *leanTable) release(key string, token uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.holders[key]; !ok || e.token != token {
		return false
	}
	delete(m.holders, key)
	return true
}

// BenchmarkAcquireRelease is one uncontended acquire+release cycle.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	b.Run("driver=inprocess", func(b *testing.B) {
		d := locks.NewInProcessDriver()
		b.ReportAllocs()
		for b.Loop() {
			l, err := d.Acquire(ctx, "bench-uncontended", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("driver=map-mutex", func(b *testing.B) {
		m := &mapTable{holders: map[string]mapEntry{}}
		b.ReportAllocs()
		for b.Loop() {
			tok, ok := m.acquire("bench-uncontended", time.Minute)
			if !ok || !m.release("bench-uncontended", tok) {
				b.Fatal("baseline failed")
			}
		}
	})
	b.Run("driver=lean", func(b *testing.B) {
		m := &leanTable{base: time.Now(), holders: map[string]leanEntry{}}
		b.ReportAllocs()
		for b.Loop() {
			tok, ok := m.acquire("bench-uncontended", time.Minute)
			if !ok || !m.release("bench-uncontended", tok) {
				b.Fatal("lean table failed")
			}
		}
	})
}

// BenchmarkSharedKey has every goroutine try one key; run it with -cpu 1,2.
// acquired/op is the share of attempts that won the key.
func BenchmarkSharedKey(b *testing.B) {
	ctx := context.Background()
	d := locks.NewInProcessDriver()
	var mu sync.Mutex
	won := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n := 0
		for pb.Next() {
			l, err := d.Acquire(ctx, "bench-shared", time.Minute)
			if errors.Is(err, locks.ErrNotAcquired) {
				continue
			}
			if err != nil {
				b.Error(err)
				return
			}
			n++
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
		mu.Lock()
		won += n
		mu.Unlock()
	})
	b.ReportMetric(float64(won)/float64(b.N), "acquired/op")
}

// signalling reports on tried when an Acquire finds the key held, so the
// benchmark releases only once the waiter is waiting.
type signalling struct {
	*locks.InProcessDriver
	tried chan struct{}
}

func (s signalling) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l, err := s.InProcessDriver.Acquire(ctx, key, ttl)
	if errors.Is(err, locks.ErrNotAcquired) {
		select {
		case s.tried <- struct{}{}:
		default:
		}
	}
	return l, err
}

// BenchmarkHandoff measures the time from a holder's Release to a waiter in
// locks.Wait holding the key, and reports its median and 99th percentile.
func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	d := signalling{locks.NewInProcessDriver(), make(chan struct{}, 1)}
	var lat []time.Duration
	for b.Loop() {
		key := "bench-handoff"
		holder, err := d.Acquire(ctx, key, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		type result struct {
			l  locks.Lease
			at time.Time
		}
		got := make(chan result, 1)
		go func() {
			l, err := locks.Wait(ctx, d, key, time.Minute, locks.WaitOptions{Budget: time.Minute, Step: time.Minute})
			if err != nil {
				b.Error(err)
			}
			got <- result{l, time.Now()}
		}()
		<-d.tried
		start := time.Now()
		if err := holder.Release(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-got
		if r.l == nil {
			b.FailNow()
		}
		lat = append(lat, r.at.Sub(start))
		if err := r.l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
