// Package namespace is the one rule of the drivers' namespaces
// (redislocks, pglocks, etcdlocks): 1 to 64 bytes of A-Z, a-z, 0-9, '_',
// '.' and '-', so that one namespace setting suits every driver, and no
// namespace reaches into another's keys (Redis's ':' and '{', etcd's '/',
// spaces are refused).
package namespace

import (
	"errors"
	"fmt"
)

// MaxLen is the longest namespace, in bytes.
const MaxLen = 64

// Check says why ns cannot be a namespace, or returns nil.
func Check(ns string) error {
	switch {
	case ns == "":
		return errors.New("must not be empty")
	case len(ns) > MaxLen:
		return fmt.Errorf("is %d bytes long, the limit is %d", len(ns), MaxLen)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("has %q at byte %d; only A-Z, a-z, 0-9, '_', '.' and '-' are allowed", c, i)
		}
	}
	return nil
}
