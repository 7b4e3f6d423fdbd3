package redislocks

import (
	"context"
	"errors"
	"fmt"

	"github.com/ndigo/ndigo/locks"
)

// ErrInvalidNamespace reports an Options.Namespace that is empty, too long or
// has a character outside [A-Za-z0-9_.-]. It wraps locks.ErrInvalid.
var ErrInvalidNamespace = fmt.Errorf("redislocks: invalid namespace: %w", locks.ErrInvalid)

// ErrRedis reports that Redis did not answer a lock operation: it was
// unreachable, timed out, or returned an error. It never means the key is
// held (that is locks.ErrNotAcquired) or the lease lost (locks.ErrLeaseLost):
// the outcome of the operation is unknown. The error wrapping it names the
// key and wraps the client's error too, so errors.Is also finds
// context.DeadlineExceeded and the like, and the context's error whenever
// the call's context ended (see withContext).
var ErrRedis = errors.New("redislocks: redis failed")

// withContext returns err, wrapping ctx's error too once ctx ended: go-redis
// reports a pipeline (the script and WAIT, with Options.MinReplicas) whose
// context ended while its reply was awaited as the connection's error
// (EOF), and a caller tells a call that ran out of its time by
// errors.Is(err, context.DeadlineExceeded) whatever the client saw first.
func withContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// ErrNotReplicated reports that fewer replicas than Options.MinReplicas
// acknowledged a lease's write within the WAIT timeout. From Acquire: the
// lease was taken on the master and then released rather than granted, since
// a failover could lose it; the key is free again unless the release failed
// too (the error then says so, and the key stays held by nobody until its
// TTL). From Extend: the lease is still held, with its earlier deadline. The
// error wrapping it also wraps ErrRedis and names the key.
var ErrNotReplicated = errors.New("redislocks: lease not replicated")
