-- $1 namespace, $2 key, $3 seq, $4 ttl in microseconds. Records seq unless a
-- live record holds seq or higher; returns a row if it did. One row per
-- (namespace, key): a successful claim overwrites it.
INSERT INTO $CLAIMS AS c (ns, key, seq, expires_at)
VALUES ($1::text, $2::text, $3::bigint, clock_timestamp() + $4::bigint * interval '1 microsecond')
ON CONFLICT (ns, key) DO UPDATE
SET seq = excluded.seq, expires_at = excluded.expires_at
WHERE c.seq < excluded.seq OR c.expires_at <= clock_timestamp()
RETURNING true
