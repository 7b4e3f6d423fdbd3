// Package watchhub is the waiting side of a lock driver's locks.Watcher:
// local waiters per key, woken by release notices that one shared
// connection receives (Redis pub/sub, PostgreSQL LISTEN). The connection
// runs only while somebody watches, and a little longer, so that a waiter
// looping Watch/Acquire/stop does not reconnect each time.
package watchhub

import (
	"context"
	"sync"
	"time"
)

const (
	// ReadyWait bounds how long the first Watch of an idle hub waits for the
	// connection to listen. Past it, waiters poll.
	ReadyWait = 500 * time.Millisecond
	// Linger keeps the connection up after the last watcher stops. It is
	// short so that tests checking for leaked goroutines see it end even
	// without Close.
	Linger = 100 * time.Millisecond
)

// Listen runs the shared connection until ctx ends, waking waiters through
// the hub as notices arrive. It calls ready once it listens, or once its
// first attempt failed, so that waiters poll meanwhile; calling ready again
// does nothing.
type Listen func(ctx context.Context, ready func())

// A Hub is a driver's waiters and its listening connection. Its methods
// are safe for concurrent use.
type Hub struct {
	listen Listen

	mu      sync.Mutex           // protects the fields below
	keys    map[string][]*waiter // waiters per key, in the order they watched
	waiters int                  // waiters that have not stopped
	watches uint64               // Watch calls so far
	run     *run                 // the running connection, or nil
	idle    *time.Timer          // checks for Linger without waiters; armed at most once at a time
	lapses  map[string]bool      // keys with a WakeAfter pending
	running sync.WaitGroup       // every listening goroutine, stopped or not
}

type waiter struct {
	ch    chan struct{}
	woken bool
}

// run is one run of the listening goroutine.
type run struct {
	cancel context.CancelFunc
	ready  chan struct{} // closed once it listens or its first attempt failed
}

// New returns a hub whose connection listen runs.
func New(listen Listen) *Hub {
	return &Hub{listen: listen, keys: map[string][]*waiter{}, lapses: map[string]bool{}}
}

// Watch returns a channel that closes when key may have been released, and
// a function that stops watching. The first Watch of an idle hub starts the
// connection and waits up to ReadyWait for it to listen, so that a release
// right after Watch returns is not missed.
func (h *Hub) Watch(key string) (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{})}
	h.mu.Lock()
	h.keys[key] = append(h.keys[key], w)
	h.waiters++
	h.watches++
	if h.run == nil {
		h.run = h.start()
	}
	ready := h.run.ready
	h.mu.Unlock()
	select {
	case <-ready:
	default:
		t := time.NewTimer(ReadyWait)
		select {
		case <-ready:
		case <-t.C:
		}
		t.Stop()
	}
	var once sync.Once
	return w.ch, func() { once.Do(func() { h.unwatch(key, w) }) }
}

func (h *Hub) unwatch(key string, w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !w.woken {
		q := h.keys[key]
		for i, x := range q {
			if x == w {
				q = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		if len(q) == 0 {
			delete(h.keys, key)
		} else {
			h.keys[key] = q
		}
	}
	h.waiters--
	if h.waiters == 0 && h.run != nil && h.idle == nil {
		h.armIdle()
	}
}

// armIdle arms the idle check. A waiter looping Watch/stop must not pay for
// a timer each time, so Watch does not stop the timer: when it fires, it
// stops the connection only if nobody watched during the whole period, and
// otherwise checks again later. h.mu must be held.
func (h *Hub) armIdle() {
	r, seen := h.run, h.watches
	h.idle = time.AfterFunc(Linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.idle = nil
		if h.run != r {
			return
		}
		switch {
		case h.waiters == 0 && h.watches == seen:
			h.stopLocked()
		case h.waiters == 0:
			h.armIdle()
		}
		// With waiters left, the last of them to stop arms it again.
	})
}

// Waiting returns how many watchers of key wait.
func (h *Hub) Waiting(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.keys[key])
}

// WakeOne wakes the longest-waiting watcher of key.
func (h *Hub) WakeOne(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.keys[key]
	if len(q) == 0 {
		return
	}
	q[0].woken = true
	close(q[0].ch)
	if len(q) == 1 {
		delete(h.keys, key)
	} else {
		h.keys[key] = q[1:]
	}
}

// WakeKey wakes every watcher of key.
func (h *Hub) WakeKey(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeLocked(key)
}

// WakeAll wakes every watcher: after the connection was down, any key may
// have been released unseen.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key := range h.keys {
		h.wakeLocked(key)
	}
}

func (h *Hub) wakeLocked(key string) {
	for _, w := range h.keys[key] {
		w.woken = true
		close(w.ch)
	}
	delete(h.keys, key)
}

// WakeAfter wakes the longest-waiting watcher of key after d, unless a
// WakeAfter of key is pending already: one timer per key, however often it
// is asked.
func (h *Hub) WakeAfter(key string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lapses[key] {
		return
	}
	h.lapses[key] = true
	time.AfterFunc(d, func() {
		h.mu.Lock()
		delete(h.lapses, key)
		h.mu.Unlock()
		h.WakeOne(key)
	})
}

// Close stops the connection, if it runs, and waits for every listening
// goroutine to end.
func (h *Hub) Close() {
	h.mu.Lock()
	h.stopLocked()
	h.mu.Unlock()
	h.running.Wait()
}

// stopLocked stops the running connection without waiting. h.mu must be
// held.
func (h *Hub) stopLocked() {
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.run != nil {
		h.run.cancel()
		h.run = nil
	}
}

// start starts the listening goroutine. h.mu must be held.
func (h *Hub) start() *run {
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{cancel: cancel, ready: make(chan struct{})}
	var once sync.Once
	ready := func() { once.Do(func() { close(r.ready) }) }
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		defer ready()
		h.listen(ctx, ready)
	}()
	return r
}
