-- $1 namespace, $2 key, $3 ttl in microseconds, $4 the claim's key, $5 its
-- seq, $6 its ttl in microseconds, $7 whether to claim when the key is held
-- too, $8 whether a key without a row reclaims others' free rows (acquire.sql). Acquires and claims in one statement (locks.ClaimAcquirer), through
-- the acquire and claim functions, so the rules are theirs. Returns the
-- token when the key was acquired and the claim recorded; 0 when the key is
-- held (and, with $7, the claim recorded); -1 when the claim was refused,
-- a lease just acquired for it being given back in the same statement (its
-- token spent, the key free: as if acquired and released, without the
-- notification, since no one could wait for it meanwhile).
DECLARE
	minted bigint;
BEGIN
	SELECT a INTO minted FROM $ACQUIRE($1, $2, $3, $8) AS a;
	IF minted IS NULL AND NOT $7 THEN
		RETURN NEXT 0;
		RETURN;
	END IF;
	PERFORM FROM $CLAIM($1, $4, $5, $6);
	IF FOUND THEN
		RETURN NEXT coalesce(minted, 0);
		RETURN;
	END IF;
	IF minted IS NOT NULL THEN
		UPDATE $LOCKS SET expires_at = '-infinity'
		WHERE ns = $1 AND digest = sha256(convert_to($2, 'UTF8')) AND token = minted;
	END IF;
	RETURN NEXT -1;
END
