-- $1 namespace, $2 key, $3 token. Frees the key if the lease is still the
-- live holder. Returns a row then, and also if this lease already released
-- the key and no successor acquired since (the token is still the lease's
-- and the row is marked free), so a Release whose reply was lost can be
-- called again.
UPDATE $LOCKS
SET expires_at = '-infinity'
WHERE ns = $1::text AND key = $2::text AND token = $3::bigint
	AND (expires_at > clock_timestamp() OR expires_at = '-infinity')
RETURNING true
