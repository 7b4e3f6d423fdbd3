package etcdlocks

import (
	"errors"
	"fmt"

	"github.com/ndigo/ndigo/locks"
)

// ErrInvalidNamespace reports an Options.Namespace that is empty, too long or
// has a character outside [A-Za-z0-9_.-]. It wraps locks.ErrInvalid.
var ErrInvalidNamespace = fmt.Errorf("etcdlocks: invalid namespace: %w", locks.ErrInvalid)

// ErrEtcd reports that etcd did not answer an operation: no member was
// reachable, the quorum was lost, the call timed out or failed. It never
// means the key is held (locks.ErrNotAcquired) or the lease lost
// (locks.ErrLeaseLost): the outcome is unknown. The error wrapping it names
// the key (for a Store, the task or the schedule) and wraps the client's
// error too, so errors.Is also finds
// context.DeadlineExceeded and the like.
var ErrEtcd = errors.New("etcdlocks: etcd failed")
