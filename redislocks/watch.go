package redislocks

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// readyWait bounds how long the first Watch of an idle driver waits for
	// Redis to confirm the subscription. Past it, waiters poll.
	readyWait = 500 * time.Millisecond
	// linger keeps the subscription up after the last watcher stops, so
	// that a waiter looping Watch/Acquire/stop does not redo it each time.
	// It is short so that tests checking for leaked goroutines see it end
	// even without Close.
	linger = 100 * time.Millisecond
	// healthEvery is how long the subscription may stay silent before it
	// is pinged; a second silent period replaces its connection, which
	// catches a hung server or a dropped connection nobody reported.
	healthEvery = 3 * time.Second
	// retryMin and retryMax bound the pause between attempts to reconnect.
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// hub is a driver's shared release subscription and its local waiters.
type hub struct {
	client Client
	prefix string // channel prefix; the pattern is prefix + "*"
	log    *slog.Logger

	mu      sync.Mutex           // protects the fields below
	keys    map[string][]*waiter // waiters per key, in the order they watched
	waiters int                  // waiters that have not stopped
	watches uint64               // Watch calls so far
	sub     *subscription        // the running subscription, or nil
	idle    *time.Timer          // checks for linger without waiters; armed at most once at a time
	lapses  map[string]bool      // keys with a wakeAfter pending
}

type waiter struct {
	ch    chan struct{}
	woken bool
}

// subscription is one run of the subscription goroutine.
type subscription struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed once Redis confirmed or the first try failed
	exited chan struct{} // closed when the goroutine has returned

	mu sync.Mutex    // protects ps
	ps *redis.PubSub // current connection; replaced when it goes silent
}

func newHub(c Client, prefix string, log *slog.Logger) *hub {
	return &hub{client: c, prefix: prefix, log: log, keys: map[string][]*waiter{}, lapses: map[string]bool{}}
}

func (h *hub) watch(key string) (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{})}
	h.mu.Lock()
	h.keys[key] = append(h.keys[key], w)
	h.waiters++
	h.watches++
	if h.sub == nil {
		h.sub = h.start()
	}
	ready := h.sub.ready
	h.mu.Unlock()
	select {
	case <-ready:
	default:
		t := time.NewTimer(readyWait)
		select {
		case <-ready:
		case <-t.C:
		}
		t.Stop()
	}
	var once sync.Once
	return w.ch, func() { once.Do(func() { h.unwatch(key, w) }) }
}

func (h *hub) unwatch(key string, w *waiter) {
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
	if h.waiters == 0 && h.sub != nil && h.idle == nil {
		h.armIdle()
	}
}

// armIdle arms the idle check. A waiter looping Watch/stop must not pay for a
// timer each time, so the timer is not stopped by Watch: when it fires, it
// stops the subscription only if nobody watched during the whole period,
// and otherwise checks again later. h.mu must be held.
func (h *hub) armIdle() {
	sub, seen := h.sub, h.watches
	h.idle = time.AfterFunc(linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.idle = nil
		if h.sub != sub {
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

// watched reports whether key has waiters.
func (h *hub) watched(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.keys[key]) > 0
}

// wakeOne wakes the longest-waiting watcher of key.
func (h *hub) wakeOne(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.keys[key]
	if len(q) == 0 {
		return
	}
	w := q[0]
	w.woken = true
	close(w.ch)
	if len(q) == 1 {
		delete(h.keys, key)
	} else {
		h.keys[key] = q[1:]
	}
}

// wakeAfter wakes the longest-waiting watcher of key after d, unless a
// wake of key is pending already: one timer per key, however many
// Acquires a reservation refuses.
func (h *hub) wakeAfter(key string, d time.Duration) {
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
		h.wakeOne(key)
	})
}

// wakeAll wakes every watcher: after the subscription was down, any key
// may have been released unseen.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, q := range h.keys {
		for _, w := range q {
			w.woken = true
			close(w.ch)
		}
		delete(h.keys, key)
	}
}

// close stops the subscription and waits for its goroutine.
func (h *hub) close() {
	h.mu.Lock()
	sub := h.sub
	h.stopLocked()
	h.mu.Unlock()
	if sub != nil {
		<-sub.exited
	}
}

// stopLocked stops the running subscription without waiting. h.mu must be
// held.
func (h *hub) stopLocked() {
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.sub == nil {
		return
	}
	sub := h.sub
	h.sub = nil
	sub.cancel()
	sub.mu.Lock()
	if sub.ps != nil {
		_ = sub.ps.Close() // unblocks a Receive in progress
	}
	sub.mu.Unlock()
}

// start starts a subscription goroutine. h.mu must be held.
func (h *hub) start() *subscription {
	ctx, cancel := context.WithCancel(context.Background())
	sub := &subscription{ctx: ctx, cancel: cancel, ready: make(chan struct{}), exited: make(chan struct{})}
	go h.run(sub)
	return sub
}

// connect replaces sub's connection; it returns nil once sub is stopped.
func (h *hub) connect(sub *subscription) *redis.PubSub {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.ps != nil {
		_ = sub.ps.Close()
		sub.ps = nil
	}
	if sub.ctx.Err() != nil {
		return nil
	}
	// PSubscribe only writes the command; the confirmation arrives
	// through Receive.
	sub.ps = h.client.PSubscribe(sub.ctx, h.prefix+"*")
	return sub.ps
}

func (h *hub) run(sub *subscription) {
	defer close(sub.exited)
	defer closeOnce(sub.ready)
	defer func() {
		sub.mu.Lock()
		if sub.ps != nil {
			_ = sub.ps.Close()
		}
		sub.mu.Unlock()
	}()
	ps := h.connect(sub)
	confirmed := false // Redis confirmed the current subscription
	everConfirmed := false
	pinged := false // a silent period passed and a PING is out
	retry := retryMin
	for ps != nil {
		msg, err := ps.ReceiveTimeout(sub.ctx, healthEvery)
		if sub.ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && confirmed {
				pinged = true
				_ = ps.Ping(sub.ctx)
				continue
			}
			if confirmed || !everConfirmed && retry == retryMin {
				h.log.Warn("redislocks: release subscription lost; waiters poll until it is back", "pattern", h.prefix+"*", "err", err)
			}
			confirmed, pinged = false, false
			if !everConfirmed {
				closeOnce(sub.ready)
			}
			select {
			case <-sub.ctx.Done():
				return
			case <-time.After(retry):
			}
			retry = min(2*retry, retryMax)
			ps = h.connect(sub)
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "psubscribe" {
				continue
			}
			if everConfirmed {
				h.log.Info("redislocks: release subscription restored", "pattern", h.prefix+"*")
				h.wakeAll()
			}
			confirmed, everConfirmed = true, true
			retry = retryMin
			closeOnce(sub.ready)
		case *redis.Message:
			h.wakeOne(strings.TrimPrefix(m.Channel, h.prefix))
		}
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
