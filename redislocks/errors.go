package redislocks

import (
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
// context.DeadlineExceeded and the like.
var ErrRedis = errors.New("redislocks: redis failed")

// ErrNotReplicated reports that fewer replicas than Options.MinReplicas
// acknowledged a lease's write within the WAIT timeout. From Acquire: the
// lease was taken on the master and then released rather than granted, since
// a failover could lose it; the key is free again unless the release failed
// too (the error then says so, and the key stays held by nobody until its
// TTL). From Extend: the lease is still held, with its earlier deadline. The
// error wrapping it also wraps ErrRedis and names the key.
var ErrNotReplicated = errors.New("redislocks: lease not replicated")
