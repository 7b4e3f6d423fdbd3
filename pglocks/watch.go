package pglocks

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// readyWait bounds how long the first Watch of an idle driver waits for
	// the database to confirm LISTEN. Past it, waiters poll.
	readyWait = 500 * time.Millisecond
	// silence is how long the listening connection may stay silent before
	// it is replaced, which catches a hung server or a dropped connection
	// nobody reported; every waiter is woken then, in case a release was
	// missed.
	silence = 10 * time.Second
	// linger keeps the listener up after the last watcher stops, so that a
	// waiter looping Watch/Acquire/stop does not reconnect each time.
	linger = 100 * time.Millisecond
	// retryMin and retryMax bound the pause between attempts to reconnect.
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// channelName returns the notification channel of a lock table: short
// enough for PostgreSQL's 63-byte identifiers whatever the table's name.
func channelName(table string) string {
	sum := sha256.Sum256([]byte(table))
	return "ndigo_released_" + hex.EncodeToString(sum[:8])
}

// payload returns what a release of key in namespace ns notifies: the same
// as the release statement's md5($1 || chr(10) || $2). A namespace holds no
// newline, so no two (ns, key) pairs share the string hashed; the fixed
// length keeps every payload under PostgreSQL's 8000-byte limit.
func payload(ns, key string) string {
	sum := md5.Sum([]byte(ns + "\n" + key))
	return hex.EncodeToString(sum[:])
}

// hub is a driver's listening connection and its local waiters.
type hub struct {
	cfg     *pgx.ConnConfig
	channel string
	log     *slog.Logger

	mu      sync.Mutex                 // protects the fields below
	keys    map[string][]chan struct{} // waiters per payload
	waiters int                        // waiters that have not stopped
	run     *listener                  // the running listener, or nil
	idle    *time.Timer                // the linger check, armed at most once at a time
	running sync.WaitGroup             // every listening goroutine, stopped or not
}

// listener is one run of the listening goroutine.
type listener struct {
	cancel context.CancelFunc
	ready  chan struct{} // closed once LISTEN succeeded or the first try failed
}

func newHub(cfg *pgx.ConnConfig, channel string, log *slog.Logger) *hub {
	return &hub{cfg: cfg, channel: channel, log: log, keys: map[string][]chan struct{}{}}
}

func (h *hub) watch(p string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.keys[p] = append(h.keys[p], ch)
	h.waiters++
	if h.run == nil {
		h.run = h.start()
	}
	ready := h.run.ready
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
	return ch, func() { once.Do(func() { h.unwatch(p, ch) }) }
}

func (h *hub) unwatch(p string, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.keys[p]
	for i, x := range q {
		if x == ch {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(h.keys, p)
	} else {
		h.keys[p] = q
	}
	h.waiters--
	if h.waiters == 0 && h.run != nil && h.idle == nil {
		h.idle = time.AfterFunc(linger, h.idleCheck)
	}
}

// idleCheck stops the listener if nobody watches, linger after the last
// watcher stopped (or later). The listener ends on its own; Close waits for
// it.
func (h *hub) idleCheck() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idle = nil
	if h.waiters == 0 && h.run != nil {
		h.run.cancel()
		h.run = nil
	}
}

// wake closes the channels of the waiters of payload p, or of every waiter
// if all is set.
func (h *hub) wake(p string, all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !all {
		for _, ch := range h.keys[p] {
			close(ch)
		}
		delete(h.keys, p)
		return
	}
	for k, q := range h.keys {
		for _, ch := range q {
			close(ch)
		}
		delete(h.keys, k)
	}
}

// start starts the listening goroutine. h.mu must be held.
func (h *hub) start() *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{cancel: cancel, ready: make(chan struct{})}
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		h.listen(ctx, l)
	}()
	return l
}

// listen keeps one connection LISTENing on the channel until ctx ends,
// reconnecting after failures and silences.
func (h *hub) listen(ctx context.Context, l *listener) {
	var readyOnce sync.Once
	ready := func() { readyOnce.Do(func() { close(l.ready) }) }
	defer ready()
	pause := retryMin
	reconnect := false // a connection listened before: releases may have been missed since
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, h.cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{h.channel}.Sanitize(), pgx.QueryExecModeSimpleProtocol)
		}
		if err != nil {
			if conn != nil {
				closeConn(conn)
			}
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("pglocks: cannot listen for releases; waiters poll", "err", err, "retry_in", pause)
			ready() // waiters poll meanwhile
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(2*pause, retryMax)
			continue
		}
		pause = retryMin
		if reconnect {
			// A release may have happened while no connection listened.
			h.wake("", true)
		}
		reconnect = true
		ready()
		for {
			wctx, cancel := context.WithTimeout(ctx, silence)
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				break
			}
			h.wake(n.Payload, false)
		}
		closeConn(conn)
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// close stops the listener, if it runs, and waits for every listening
// goroutine to end.
func (h *hub) close() {
	h.mu.Lock()
	if h.run != nil {
		h.run.cancel()
		h.run = nil
	}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	h.mu.Unlock()
	h.running.Wait()
}
