package pglocks

import (
	"github.com/ndigo/ndigo/locks"
)

// ForgetRelease makes a released lease's handle held again, as if its
// Release had failed with ErrDatabase after the database released it (the
// reply lost), so that a test can call Release again.
func ForgetRelease(l locks.Lease) {
	l.(*handle).Unrelease()
}

// Watchers returns how many watchers of key d has.
func Watchers(d *Driver, key string) int {
	return d.hub.Waiting(payload(d.ns, key))
}

// TokenSequence returns the quoted name of the sequence d's tokens come
// from.
func TokenSequence(d *Driver) string {
	return d.sql.tokens
}

// Channel returns the notification channel of d's releases.
func Channel(d *Driver) string {
	return d.channel
}

// AppendEventSQL returns the statement of s's AppendEvent, whose arguments
// are s's namespace, then the event's Key, At (Unix nanoseconds), Node,
// Actor, Action, Target, Note, Before, After, then the trail's length.
func AppendEventSQL(s *Store) string {
	return s.sql.appendEvent
}
