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
