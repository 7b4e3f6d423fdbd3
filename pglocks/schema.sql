-- The lock rows: one per (namespace, key) held, plus freed rows (released or
-- expired) until an Acquire of a new key reclaims them (acquire.sql). digest
-- is sha256 of the key's UTF-8 bytes, so that keys of any length fit the
-- index; key is kept to check it and to show it. A key is free when
-- expires_at is past; Release sets it to -infinity. token is the lease's
-- fencing token, drawn from $TOKENS when the lease was acquired. waited
-- says that an Acquire of a driver watching the key found it held, since
-- the row was inserted: only then does a Release notify (release.sql).
CREATE TABLE IF NOT EXISTS $LOCKS (
	ns         text        NOT NULL,
	digest     bytea       NOT NULL,
	key        text        NOT NULL,
	token      bigint      NOT NULL,
	expires_at timestamptz NOT NULL,
	waited     boolean     NOT NULL DEFAULT false,
	PRIMARY KEY (ns, digest)
);
-- The claim rows (locks.Claimer): one per (namespace, key) claimed within
-- the claims' TTL, holding the latest sequence number claimed and when that
-- record expires. Claims delete expired rows as they go (claim.sql), finding
-- them through the expiry index.
CREATE TABLE IF NOT EXISTS $CLAIMS (
	ns         text        NOT NULL,
	digest     bytea       NOT NULL,
	key        text        NOT NULL,
	seq        bigint      NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (ns, digest)
);
-- Every fencing token of the table's keys: strictly increasing overall, so
-- per key too, whether or not the key kept its row. A sequence is WAL-logged
-- ahead of the values it hands out, and a token is returned only once the
-- Acquire that drew it committed, so no token is handed out twice, across
-- crashes too.
CREATE SEQUENCE IF NOT EXISTS $TOKENS AS bigint;
-- The previous layout (a primary key on (ns, key), whose index refused keys
-- over about 2.7 KB, no digest, and tokens counted per row, the rows never
-- deleted) is migrated in place, once: with the table locked against the
-- previous version's statements, the sequence starts above every token of
-- the table, the free rows go (their tokens are below the sequence now),
-- and the rows left get their digest and the new primary key. The previous
-- version's Acquire and Claim then fail on the migrated tables (their ON
-- CONFLICT (ns, key) matches no constraint) instead of counting a token
-- from the row.
DO $migrate$
DECLARE
	pk name;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '$LOCKS'::regclass AND attname = 'digest' AND NOT attisdropped) THEN
		LOCK TABLE $LOCKS IN ACCESS EXCLUSIVE MODE;
		PERFORM setval('$TOKENS', greatest(max(token), (SELECT last_value FROM $TOKENS))) FROM $LOCKS;
		DELETE FROM $LOCKS WHERE expires_at <= clock_timestamp();
		ALTER TABLE $LOCKS ADD COLUMN digest bytea;
		UPDATE $LOCKS SET digest = sha256(convert_to(key, 'UTF8'));
		SELECT conname INTO pk FROM pg_constraint WHERE conrelid = '$LOCKS'::regclass AND contype = 'p';
		EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '$LOCKS', pk);
		ALTER TABLE $LOCKS ALTER COLUMN digest SET NOT NULL, ADD PRIMARY KEY (ns, digest);
	END IF;
	IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '$CLAIMS'::regclass AND attname = 'digest' AND NOT attisdropped) THEN
		LOCK TABLE $CLAIMS IN ACCESS EXCLUSIVE MODE;
		DELETE FROM $CLAIMS WHERE expires_at <= clock_timestamp();
		ALTER TABLE $CLAIMS ADD COLUMN digest bytea;
		UPDATE $CLAIMS SET digest = sha256(convert_to(key, 'UTF8'));
		SELECT conname INTO pk FROM pg_constraint WHERE conrelid = '$CLAIMS'::regclass AND contype = 'p';
		EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '$CLAIMS', pk);
		ALTER TABLE $CLAIMS ALTER COLUMN digest SET NOT NULL, ADD PRIMARY KEY (ns, digest);
	END IF;
	-- The lock table of the layout before waited: the column is added with
	-- its default (no rewrite of the rows), every row unmarked, so the
	-- releases of the leases held then notify only once an Acquire of a
	-- watching driver marks them. Checked first: ALTER TABLE would take its
	-- lock, and wait for the guarded transactions, on every CreateSchema.
	IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '$LOCKS'::regclass AND attname = 'waited' AND NOT attisdropped) THEN
		ALTER TABLE $LOCKS ADD COLUMN waited boolean NOT NULL DEFAULT false;
	END IF;
END
$migrate$;
CREATE INDEX IF NOT EXISTS $EXPIRY ON $CLAIMS (ns, expires_at);
