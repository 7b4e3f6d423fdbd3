-- $1 namespace, $2 key, $3 ttl in microseconds, $4 the claim's key, $5 its
-- seq, $6 its ttl in microseconds, $7 whether to claim when the key is held
-- too, $8 whether a key without a row reclaims others' free rows (acquire.sql). Acquires and claims in one statement (locks.ClaimAcquirer), through
-- the acquire and claim functions, so the rules are theirs; a held key is
-- not marked waited (the scheduler's wait for it is a locks.Wait, whose
-- Acquires mark it). Returns the
-- token when the key was acquired and the claim recorded; 0 when the key is
-- held (and, with $7, the claim recorded); -1 when the claim was refused,
-- a lease just acquired for it being given back in the same statement (its
-- token spent, the key free: as if acquired and released, without the
-- notification, since no one could wait for it meanwhile).
DECLARE
	minted bigint;
BEGIN
	minted := $ACQUIRE($1, $2, $3, $8, false);
	IF minted = 0 AND NOT $7 THEN
		RETURN 0;
	END IF;
	PERFORM FROM $CLAIM($1, $4, $5, $6);
	IF FOUND THEN
		RETURN minted;
	END IF;
	IF minted > 0 THEN
		UPDATE $LOCKS SET expires_at = '-infinity'
		WHERE ns = $1 AND digest = sha256(convert_to($2, 'UTF8')) AND token = minted;
	END IF;
	RETURN -1;
END
