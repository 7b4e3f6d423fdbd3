-- $1 namespace, $2 key, $3 seq, $4 ttl in microseconds. Records seq unless a
-- live record holds seq or higher; returns a row if it did. One row per
-- (namespace, key): a successful claim overwrites it. The row is found by
-- the digest of the key (sha256), as in the lock table; a row of another key
-- with the same digest (a collision) is never overwritten: the claim
-- answers false.
WITH reclaimed AS (
	-- Reclamation: up to 8 other rows of the namespace whose record expired,
	-- oldest first, found through the expiry index, so the work per call is
	-- bounded. An expired row means the same as no row (the claim below
	-- overwrites one whatever its seq), so deleting it changes no answer. A
	-- row that another statement locks (a claim renewing it) is skipped,
	-- and one renewed since this statement's snapshot is rechecked and kept.
	-- The own key's row is left to the claim below, which overwrites it if
	-- it expired.
	DELETE FROM $CLAIMS AS r
	WHERE r.ctid = ANY (ARRAY(
		SELECT e.ctid FROM $CLAIMS AS e
		WHERE e.ns = $1::text AND e.expires_at <= clock_timestamp()
			AND e.digest <> sha256(convert_to($2::text, 'UTF8'))
		ORDER BY e.expires_at
		LIMIT 8
		FOR UPDATE SKIP LOCKED
	))
)
INSERT INTO $CLAIMS AS c (ns, digest, key, seq, expires_at)
VALUES ($1::text, sha256(convert_to($2::text, 'UTF8')), $2::text, $3::bigint,
	clock_timestamp() + $4::bigint * interval '1 microsecond')
ON CONFLICT (ns, digest) DO UPDATE
SET seq = excluded.seq, expires_at = excluded.expires_at
WHERE c.key = excluded.key AND (c.seq < excluded.seq OR c.expires_at <= clock_timestamp())
RETURNING true
