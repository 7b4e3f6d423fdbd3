-- $1 namespace, $2 key, $3 token, $4 ttl in microseconds. Returns a row if
-- the lease is still the live holder, now expiring ttl from now. As an
-- update of non-key columns it takes FOR NO KEY UPDATE, which does not
-- conflict with Guard's FOR KEY SHARE.
UPDATE $LOCKS
SET expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE ns = $1::text AND digest = sha256(convert_to($2::text, 'UTF8')) AND key = $2::text
	AND token = $3::bigint AND expires_at > clock_timestamp()
RETURNING true
