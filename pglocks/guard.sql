-- $1 namespace, $2 key, $3 token. Run inside the caller's transaction:
-- returns a row if the lease is the live holder, and keeps the row locked
-- FOR KEY SHARE until the transaction ends, so that Acquire (FOR UPDATE
-- SKIP LOCKED) skips it and answers "held", while the holder's own Extend
-- and Release (FOR NO KEY UPDATE) still go through.
--
-- In READ COMMITTED the row locked is the latest version. In REPEATABLE
-- READ and SERIALIZABLE it is the version of the transaction's snapshot,
-- which may predate an Extend, a Release or a successor's Acquire: FOR KEY
-- SHARE does not conflict with their updates, so it locks that old version
-- (and the newer ones) without an error. So before it judges the row, the
-- function checks, in a subtransaction that it rolls back, that the
-- snapshot's version is the latest: FOR SHARE NOWAIT conflicts with every
-- update, and raises a serialization failure for a version updated after
-- the snapshot (lock_not_available for one being updated); with no row in
-- the snapshot, an insertion raises one if a row was inserted after it.
-- Either way the function raises a serialization failure (40001): the
-- transaction must be retried, and its next snapshot sees the row as it is.
-- It never judges a lease lost from a row that is not the latest. The
-- clock is read before the check: an Extend after the check finds the same
-- expiry as the check did.
DECLARE
	seen        boolean;
	row_token   bigint;
	row_expires timestamptz;
	checked_at  timestamptz;
BEGIN
	SELECT l.token, l.expires_at INTO row_token, row_expires FROM $LOCKS AS l
	WHERE l.ns = $1 AND l.digest = sha256(convert_to($2, 'UTF8')) AND l.key = $2
	FOR KEY SHARE;
	seen := FOUND;
	checked_at := clock_timestamp();
	IF current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		BEGIN
			IF seen THEN
				PERFORM FROM $LOCKS AS l
				WHERE l.ns = $1 AND l.digest = sha256(convert_to($2, 'UTF8')) AND l.key = $2
				FOR SHARE NOWAIT;
			ELSE
				INSERT INTO $LOCKS (ns, digest, key, token, expires_at)
				VALUES ($1, sha256(convert_to($2, 'UTF8')), $2, 0, '-infinity')
				ON CONFLICT DO NOTHING;
			END IF;
			RAISE SQLSTATE 'NDG00';
		EXCEPTION
			WHEN serialization_failure OR lock_not_available THEN
				RAISE SQLSTATE '40001' USING
					MESSAGE = 'pglocks: the lock row changed after the transaction''s snapshot was taken',
					HINT = 'Retry the transaction: its next snapshot sees the row as it is.';
			WHEN SQLSTATE 'NDG00' THEN
				NULL; -- the snapshot's version is the latest
		END;
	END IF;
	IF seen AND row_token = $3 AND row_expires > checked_at THEN
		RETURN NEXT true;
	END IF;
END
