-- The lock rows: one per (namespace, key) ever acquired, never deleted, so
-- that token (the last fencing token minted for the key) only grows. A key
-- is free when expires_at is past; Release sets it to -infinity.
CREATE TABLE IF NOT EXISTS $LOCKS (
	ns         text        NOT NULL,
	key        text        NOT NULL,
	token      bigint      NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (ns, key)
);
-- The claim rows (locks.Claimer): one per (namespace, key) claimed within
-- the claims' TTL, holding the latest sequence number claimed and when that
-- record expires. Claims delete expired rows as they go (claim.sql), finding
-- them through the expiry index.
CREATE TABLE IF NOT EXISTS $CLAIMS (
	ns         text        NOT NULL,
	key        text        NOT NULL,
	seq        bigint      NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (ns, key)
);
CREATE INDEX IF NOT EXISTS $EXPIRY ON $CLAIMS (ns, expires_at);
