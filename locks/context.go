package locks

import "context"

type leaseKey struct{}

// NewContext returns a copy of ctx that carries l, so that code running under
// the lock can hand l.Token() to the storage it writes.
func NewContext(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// FromContext returns the lease ctx carries, if any.
func FromContext(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// WithLease returns a copy of ctx that carries l and is cancelled, with
// cause ErrLeaseLost, once l.Done() closes. Call the CancelFunc when the work
// under the lease ends, to free the context's resources.
func WithLease(ctx context.Context, l Lease) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(NewContext(ctx, l))
	go func() {
		select {
		case <-l.Done():
			cancel(ErrLeaseLost)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

type waitingKey struct{}

// WithWaiting returns a copy of ctx that tells a driver's Acquire it is
// made by a caller that waits for the key while it is held, as [Wait] does,
// and whether that caller has already waited for it (was refused, then woken
// or polled again). A driver may use it to give a released key to callers
// that waited before others: redislocks reserves a key released while such
// a caller waited for callers with waited true. Drivers that do not use it
// ignore it.
func WithWaiting(ctx context.Context, waited bool) context.Context {
	return context.WithValue(ctx, waitingKey{}, waited)
}

// Waiting reports what WithWaiting put in ctx: whether the Acquire is made
// by a waiting caller, and whether that caller has waited already.
func Waiting(ctx context.Context) (waiting, waited bool) {
	w, ok := ctx.Value(waitingKey{}).(bool)
	return ok, w
}
