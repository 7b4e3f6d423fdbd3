// Package notify delivers messages about tasks to where an operator looks:
// a webhook whose JSON body is signed with HMAC-SHA256 ([Webhook]), a
// Slack-compatible incoming webhook ([Slack]), or Go code ([Func]).
//
// [Deliver] sends one [Message] through one [Notifier], retrying with
// backoff on failures that a retry can mend (a network error, a timeout, a
// 5xx, 408, 425 or 429 answer) until it is delivered, the retries run out
// or the context ends. Every attempt carries the message's [Message].ID,
// its idempotency key: a receiver that keeps each ID once keeps the message
// once, however many attempts, or senders, reached it.
//
// A message can be sent from a scheduling.Listener of your own:
//
//	hook := notify.Webhook{URL: "https://hooks.example.com/ndigo", Secret: os.Getenv("HOOK_SECRET")}
//	err := notify.Deliver(ctx, hook, notify.Message{ID: "payroll@2026-01-01T00:00:00Z", Task: "payroll",
//		Event: "failed", Detail: "ledger unavailable"}, notify.Retry{})
package notify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"
)

// A Message says something happened to a task. Its fields are the JSON
// body that [Webhook] posts.
type Message struct {
	// ID is the message's idempotency key: the same for every attempt and
	// every node that sends it, so that a receiver keeps it once. Required.
	ID string `json:"id"`
	// Task is the task's name.
	Task string `json:"task"`
	// Event is what happened, such as "late", "down", "failing" or
	// "recovered". Required.
	Event string `json:"event"`
	// At is when it happened (not when the message is sent).
	At time.Time `json:"at"`
	// Detail says more, for a person: the fire missed, the error.
	Detail string `json:"detail,omitempty"`
	// Node is the node that sends the message.
	Node string `json:"node,omitempty"`
}

// check returns an error naming the field a message cannot go without.
func (m Message) check() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: Message.ID is empty: a receiver needs it to keep the message once", ErrInvalid)
	case m.Event == "":
		return fmt.Errorf("%w: Message.Event is empty (message %q): say what happened", ErrInvalid, m.ID)
	}
	return nil
}

// A Notifier sends a message once: one attempt, which [Deliver] repeats.
// An error wrapping [ErrPermanent] is one that repeating cannot mend.
type Notifier interface {
	Notify(ctx context.Context, m Message) error
}

// Func is a [Notifier] of Go code.
type Func func(ctx context.Context, m Message) error

// Notify calls f.
func (f Func) Notify(ctx context.Context, m Message) error { return f(ctx, m) }

// Errors of this package.
var (
	// ErrInvalid: a message or a notifier's settings that cannot be sent
	// as they are; the error names the field.
	ErrInvalid = errors.New("notify: invalid")
	// ErrPermanent: the receiver refused the message in a way that a retry
	// cannot mend (a 4xx answer other than 408, 425 and 429, a bad URL).
	ErrPermanent = errors.New("notify: refused")
)

// Retry is how [Deliver] repeats a failed attempt: after Backoff, then
// twice as long each time up to MaxBackoff, each wait shortened by up to a
// fifth at random so that the senders of many messages do not retry in
// step; a receiver's Retry-After (of a 429 or 503) lengthens the next wait
// to it, up to MaxBackoff. The zero value is ready to use.
type Retry struct {
	// Attempts is how many attempts at most, the first included; zero
	// means DefaultAttempts.
	Attempts int
	// Backoff is the first wait; zero means DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff caps each wait; zero means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Clock times the waits; nil means the real clock.
	Clock clockwork.Clock
}

// Retry's defaults: 8 attempts over about four minutes.
const (
	DefaultAttempts   = 8
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = time.Minute
)

// An AttemptsError is [Deliver]'s error when every attempt failed or one
// was refused: it keeps how many attempts were made and the last one's
// error, which it wraps.
type AttemptsError struct {
	Attempts int
	Err      error
}

func (e *AttemptsError) Error() string {
	return fmt.Sprintf("notify: not delivered after %d attempt(s): %v", e.Attempts, e.Err)
}

func (e *AttemptsError) Unwrap() error { return e.Err }

// Deliver sends m through n, repeating failed attempts as r says. It
// returns nil once an attempt succeeds; an [*AttemptsError] when the
// attempts ran out or one was refused ([ErrPermanent]); the context's error
// when ctx ends first; an error wrapping [ErrInvalid] for a message without
// ID or Event or settings out of range, before any attempt.
func Deliver(ctx context.Context, n Notifier, m Message, r Retry) error {
	if n == nil {
		return fmt.Errorf("%w: the Notifier is nil", ErrInvalid)
	}
	if err := m.check(); err != nil {
		return err
	}
	if r.Attempts < 0 || r.Backoff < 0 || r.MaxBackoff < 0 {
		return fmt.Errorf("%w: Retry{Attempts: %d, Backoff: %v, MaxBackoff: %v}: none may be negative", ErrInvalid, r.Attempts, r.Backoff, r.MaxBackoff)
	}
	attempts, wait, maxWait, clock := r.Attempts, r.Backoff, r.MaxBackoff, r.Clock
	if attempts == 0 {
		attempts = DefaultAttempts
	}
	if wait == 0 {
		wait = DefaultBackoff
	}
	if maxWait == 0 {
		maxWait = DefaultMaxBackoff
	}
	wait = min(wait, maxWait)
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	for i := 1; ; i++ {
		err := n.Notify(ctx, m)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("notify: message %q: %w (after %d attempt(s): %v)", m.ID, context.Cause(ctx), i, err)
		case errors.Is(err, ErrPermanent) || i >= attempts:
			return &AttemptsError{Attempts: i, Err: err}
		}
		t := clock.NewTimer(pause(wait, maxWait, err, rand.Int64N))
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("notify: message %q: %w (after %d attempt(s): %v)", m.ID, context.Cause(ctx), i, err)
		}
		wait = min(2*wait, maxWait)
	}
}

// pause is the wait after an attempt that failed with err, wait being
// the backoff's: shortened by up to a fifth (rnd(n) draws from [0, n)),
// or the receiver's Retry-After if longer, up to maxWait.
func pause(wait, maxWait time.Duration, err error, rnd func(int64) int64) time.Duration {
	d := wait - time.Duration(rnd(int64(wait)/5+1))
	var after *retryAfterError
	if errors.As(err, &after) && after.d > d {
		d = min(after.d, maxWait)
	}
	return d
}

// retryAfterError is a failed attempt whose receiver asked to wait d
// before the next (Retry-After).
type retryAfterError struct {
	err error
	d   time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }
