-- $1 namespace, $2 key, $3 ttl in microseconds, $4 whether a key without a
-- row reclaims free rows of others first (see below). Returns the new token, or no
-- row when the key is held. Never waits on a row lock: a row that another
-- transaction locks (a guarded transaction, see Guard, or a concurrent
-- operation on the key) is skipped, and the key answers as held, after up
-- to three more tries (2, 4, 8ms later) if the row is free (see the loop). Each step
-- is a statement of its own, so the usual call (the key's row exists) runs
-- one.
DECLARE
	d     bytea := sha256(convert_to($2, 'UTF8'));
	minted bigint;
BEGIN
	-- A free (expired or released) row of the key that no transaction
	-- locks: a new token, drawn once the row is locked (so after the commit
	-- of the acquisition that set the row's token), and the new expiry. A
	-- row of another key with the same digest (a sha256 collision) is never
	-- taken: the key answers as held.
	FOR attempt IN 1 .. 4 LOOP
		UPDATE $LOCKS AS l
		SET token = nextval('$TOKENS'), expires_at = clock_timestamp() + $3 * interval '1 microsecond'
		WHERE l.ns = $1 AND l.digest = d AND l.key = $2 AND l.ctid = (
			SELECT f.ctid FROM $LOCKS AS f
			WHERE f.ns = $1 AND f.digest = d AND f.expires_at <= clock_timestamp()
			FOR UPDATE SKIP LOCKED
		)
		RETURNING l.token INTO minted;
		IF FOUND THEN
			RETURN NEXT minted;
			RETURN;
		END IF;
		-- A free row that another transaction locks is most often one that
		-- an Acquire of another key is reclaiming (below): that statement
		-- ends in a moment, the row deleted and the key free. Answering held
		-- would skip a fire that nobody runs (the scheduler tries each fire
		-- on one node). So the key is tried again after 2, 4 and 8ms (the
		-- reclaimer's transaction may be an AcquireClaim, which claims
		-- before it commits); a row still locked then (an Acquire of this
		-- key taking it, a guarded transaction of a past lease) answers
		-- held, as before. A live or missing row does not wait.
		EXIT WHEN attempt = 4;
		PERFORM FROM $LOCKS AS l WHERE l.ns = $1 AND l.digest = d AND l.expires_at <= clock_timestamp();
		EXIT WHEN NOT FOUND;
		PERFORM pg_sleep(0.001 * 2 ^ attempt);
	END LOOP;
	-- The row exists, held or locked: the key is held.
	PERFORM FROM $LOCKS AS l WHERE l.ns = $1 AND l.digest = d;
	IF FOUND THEN
		RETURN;
	END IF;
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
	-- first's statement to commit, then inserts nothing (held). The token is
	-- drawn only once the row is in: drawn before, it could be older than a
	-- whole acquisition of the key that took place, and whose row was
	-- reclaimed, before this insertion found the key without a row.
	INSERT INTO $LOCKS (ns, digest, key, token, expires_at)
	VALUES ($1, d, $2, 0, clock_timestamp() + $3 * interval '1 microsecond')
	ON CONFLICT (ns, digest) DO NOTHING;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	UPDATE $LOCKS AS l SET token = nextval('$TOKENS')
	WHERE l.ns = $1 AND l.digest = d
	RETURNING l.token INTO minted;
	RETURN NEXT minted;
END
