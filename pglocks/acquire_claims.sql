-- $1 namespace; per fire i, $2[i] its key, $3[i] its ttl in microseconds,
-- $4[i] its claim's key, $5[i] the claim's seq, $6[i] the claim's ttl in
-- microseconds, $7[i] whether to claim when the key is held too. Takes each
-- fire as acquire_claim.sql does, without reclaiming others' rows (see
-- acquire.sql), in one statement, so one transaction: the
-- leases and claims of all of them commit together, and an error in any
-- undoes them all. The fires are taken in the order of their keys (fires on
-- one key in the order given), so that calls racing for the same keys wait
-- for each other's rows in one order and cannot deadlock. Returns one row
-- per fire, in the order given, acquire_claim.sql's.
DECLARE
	replies bigint[];
	i bigint;
BEGIN
	FOR i IN SELECT f.o FROM unnest($2) WITH ORDINALITY AS f(k, o) ORDER BY f.k COLLATE "C", f.o LOOP
		replies[i] := $ACQUIRE_CLAIM($1, $2[i], $3[i], $4[i], $5[i], $6[i], $7[i], false);
	END LOOP;
	FOR i IN 1 .. coalesce(array_length($2, 1), 0) LOOP
		RETURN NEXT replies[i];
	END LOOP;
END
