-- $1 namespace, $2 key, $3 token. Run inside the caller's transaction:
-- returns a row if the lease is the live holder, and keeps the row locked
-- FOR KEY SHARE until the transaction ends, so that Acquire (FOR UPDATE
-- SKIP LOCKED) skips it and answers "held", while the holder's own Extend
-- and Release (FOR NO KEY UPDATE) still go through.
SELECT true FROM $LOCKS
WHERE ns = $1::text AND key = $2::text AND token = $3::bigint AND expires_at > clock_timestamp()
FOR KEY SHARE
