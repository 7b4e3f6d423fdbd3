package pglocks

import (
	"errors"
	"fmt"

	"github.com/ndigo/ndigo/locks"
)

// ErrInvalidNamespace reports an Options.Namespace that is empty, too long or
// has a character outside [A-Za-z0-9_.-]. It wraps locks.ErrInvalid.
var ErrInvalidNamespace = fmt.Errorf("pglocks: invalid namespace: %w", locks.ErrInvalid)

// ErrDatabase reports that the database did not answer a lock operation: it
// was unreachable, timed out, the context ended, or it returned an error. It
// never means the key is held (that is locks.ErrNotAcquired) or the lease
// lost (locks.ErrLeaseLost): the outcome of the operation is unknown (see
// Outcome unknown in the package documentation). The error wrapping it names
// the key and wraps pgx's error too, so errors.Is also finds
// context.DeadlineExceeded and the like.
var ErrDatabase = errors.New("pglocks: database failed")
