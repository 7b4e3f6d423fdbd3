-- $1 namespace, $2 key, $3 ttl in microseconds. Returns the new token, or no
-- row when the key is held. Never waits on a row lock: a row that another
-- transaction locks (a guarded transaction, see Guard, or a concurrent
-- operation on the key) is skipped, and the key answers as held.
WITH inserted AS (
	-- A key never seen: its row, token 1. NOT EXISTS spares the speculative
	-- insertion (and its wait on a concurrent updater) when the row exists.
	INSERT INTO $LOCKS (ns, key, token, expires_at)
	SELECT $1::text, $2::text, 1, clock_timestamp() + $3::bigint * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT FROM $LOCKS WHERE ns = $1::text AND key = $2::text)
	ON CONFLICT (ns, key) DO NOTHING
	RETURNING token
), taken AS (
	-- A free (expired or released) row that no transaction locks: the next
	-- token, and the new expiry.
	UPDATE $LOCKS AS l
	SET token = l.token + 1, expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
	WHERE l.ns = $1::text AND l.key = $2::text AND l.key = (
		SELECT f.key FROM $LOCKS AS f
		WHERE f.ns = $1::text AND f.key = $2::text AND f.expires_at <= clock_timestamp()
		FOR UPDATE SKIP LOCKED
	)
	RETURNING l.token
)
SELECT token FROM inserted
UNION ALL
SELECT token FROM taken
