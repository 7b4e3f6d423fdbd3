-- $1 namespace, $2 key, $3 seq, $4 ttl in microseconds. Records seq unless a
-- live record holds seq or higher; returns a row if it did. One row per
-- (namespace, key): a successful claim overwrites it.
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
	WHERE (r.ns, r.key) IN (
		SELECT e.ns, e.key FROM $CLAIMS AS e
		WHERE e.ns = $1::text AND e.expires_at <= clock_timestamp() AND e.key <> $2::text
		ORDER BY e.expires_at
		LIMIT 8
		FOR UPDATE SKIP LOCKED
	)
)
INSERT INTO $CLAIMS AS c (ns, key, seq, expires_at)
VALUES ($1::text, $2::text, $3::bigint, clock_timestamp() + $4::bigint * interval '1 microsecond')
ON CONFLICT (ns, key) DO UPDATE
SET seq = excluded.seq, expires_at = excluded.expires_at
WHERE c.seq < excluded.seq OR c.expires_at <= clock_timestamp()
RETURNING true
