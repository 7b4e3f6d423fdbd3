-- $1 namespace, $2 key, $3 ttl in microseconds, $4 whether a key without a
-- row reclaims free rows of others first (see below), $5 whether the
-- calling driver has a watcher of the key (Driver.Watch). Returns the new
-- token; 0 when the key is held; -1 when it is held and $5, but its row
-- could not be marked waited (see below). Never waits on a row lock: a row
-- that another transaction locks (a guarded transaction, see Guard, or a
-- concurrent operation on the key) is skipped, and the key answers as held,
-- after up to three more tries (2, 4, 8ms later) if the row is free or
-- unmarked (see the loop). Each step is a statement of its own, so the usual
-- call (the key's row exists and is free) runs one.
DECLARE
	d     bytea := sha256(convert_to($2, 'UTF8'));
	minted bigint;
BEGIN
	FOR attempt IN 1 .. 4 LOOP
		-- A free (expired or released) row of the key that no transaction
		-- locks: a new token, drawn once the row is locked (so after the
		-- commit of the acquisition that set the row's token), and the new
		-- expiry. A row of another key with the same digest (a sha256
		-- collision) is never taken: the key answers as held.
		UPDATE $LOCKS AS l
		SET token = nextval('$TOKENS'), expires_at = clock_timestamp() + $3 * interval '1 microsecond'
		WHERE l.ns = $1 AND l.digest = d AND l.key = $2 AND l.ctid = (
			SELECT f.ctid FROM $LOCKS AS f
			WHERE f.ns = $1 AND f.digest = d AND f.expires_at <= clock_timestamp()
			FOR UPDATE SKIP LOCKED
		)
		RETURNING l.token INTO minted;
		IF FOUND THEN
			RETURN minted;
		END IF;
		-- The key is held. A driver that watches it marks its row waited,
		-- so that the holder's Release notifies (release.sql): a release of
		-- a key that no watching driver found held notifies nobody, and
		-- costs no NOTIFY, which serializes the commits of every notifying
		-- transaction of the database. The mark stays until the row is
		-- deleted (reclaimed while free). It is made on the row's latest
		-- version and only while that version is held (FOR NO KEY UPDATE,
		-- which a guarded transaction's FOR KEY SHARE does not block,
		-- rechecks the condition on it): a release that committed before
		-- the mark leaves the key free, and the loop takes it.
		IF $5 THEN
			UPDATE $LOCKS AS l SET waited = true
			WHERE l.ctid = (
				SELECT w.ctid FROM $LOCKS AS w
				WHERE w.ns = $1 AND w.digest = d AND w.key = $2 AND NOT w.waited AND w.expires_at > clock_timestamp()
				FOR NO KEY UPDATE SKIP LOCKED
			);
			IF FOUND THEN
				RETURN 0;
			END IF;
		END IF;
		-- Held, and marked or not watched (or a row of another key with the
		-- key's digest): held, at once.
		PERFORM FROM $LOCKS AS l
		WHERE l.ns = $1 AND l.digest = d
			AND (l.key <> $2 OR l.expires_at > clock_timestamp() AND (l.waited OR NOT $5));
		IF FOUND THEN
			RETURN 0;
		END IF;
		PERFORM FROM $LOCKS AS l WHERE l.ns = $1 AND l.digest = d;
		EXIT WHEN NOT FOUND;
		-- The row is free, or held and not marked, and another transaction
		-- locks it: most often an Acquire of another key reclaiming it
		-- (below), an Acquire of this key taking it, or a Release or an
		-- Extend of it, each ending in a moment; or it was freed since this
		-- call's first statement. Answering held at once would skip a fire
		-- that nobody runs (the scheduler tries each fire on one node), or
		-- leave the row unmarked. So the key is tried again after 2, 4 and
		-- 8ms (the reclaimer's transaction may be an AcquireClaim, which
		-- claims before it commits); a row still locked then (an
		-- AcquireClaims taking it, a guarded transaction of a past lease)
		-- answers held, -1 if it could not be marked.
		IF attempt = 4 THEN
			RETURN CASE WHEN $5 THEN -1 ELSE 0 END;
		END IF;
		PERFORM pg_sleep(0.001 * 2 ^ attempt);
	END LOOP;
	-- A key without a row. Reclamation first: of the 32 rows of the
	-- namespace that follow the key's digest in the primary key (wrapping
	-- around), the free ones, up to 8, are deleted. The work per call is
	-- bounded, and no index on the expiry is needed (one would cost every
	-- Extend, Acquire and Release its HOT update); since digests are
	-- uniform, those rows are a sample of the namespace's. A free row means
	-- the same as no row: its key's next Acquire inserts a row with a token
	-- from the sequence, above the deleted one's. A row that another
	-- transaction locks (a guarded transaction, an Acquire taking it) is
	-- skipped, and one changed since the statement's snapshot is kept.
	--
	-- The fires of an AcquireClaims call do not reclaim ($4 false): they
	-- are one transaction, which would keep the rows it deletes locked
	-- until the last fire is taken, and another node's Acquire of such a
	-- row's key, finding it locked, answers held (a fire nobody runs). The
	-- scheduler's keys are its tasks', a row each; one-off keys' Acquires
	-- reclaim.
	IF $4 THEN
	DELETE FROM $LOCKS AS r
	WHERE r.ctid = ANY (ARRAY(
		SELECT e.ctid FROM $LOCKS AS e
		WHERE e.ctid = ANY (ARRAY(
			(SELECT w.ctid FROM $LOCKS AS w WHERE w.ns = $1 AND w.digest > d ORDER BY w.digest LIMIT 32)
			UNION ALL
			(SELECT w.ctid FROM $LOCKS AS w WHERE w.ns = $1 AND w.digest < d ORDER BY w.digest LIMIT 32)
			LIMIT 32
		)) AND e.expires_at <= clock_timestamp()
		LIMIT 8
		FOR UPDATE SKIP LOCKED
	));
	END IF;
	-- Two Acquires of the key may race here: the second waits for the
	-- first's statement to commit, then inserts nothing (held; -1 if
	-- watched: it holds the rows it reclaimed, so it does not wait again to
	-- mark the new row). The token is drawn only once the row is in: drawn
	-- before, it could be older than a whole acquisition of the key that
	-- took place, and whose row was reclaimed, before this insertion found
	-- the key without a row.
	INSERT INTO $LOCKS (ns, digest, key, token, expires_at)
	VALUES ($1, d, $2, 0, clock_timestamp() + $3 * interval '1 microsecond')
	ON CONFLICT (ns, digest) DO NOTHING;
	IF NOT FOUND THEN
		RETURN CASE WHEN $5 THEN -1 ELSE 0 END;
	END IF;
	UPDATE $LOCKS AS l SET token = nextval('$TOKENS')
	WHERE l.ns = $1 AND l.digest = d
	RETURNING l.token INTO minted;
	RETURN minted;
END
