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
