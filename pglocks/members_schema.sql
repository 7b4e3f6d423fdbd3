-- The members of the scheduler's groups (locks.Membership): one row per
-- (namespace, group, member) heartbeating within its life, on the
-- database's clock. A heartbeat deletes its group's lapsed rows.
CREATE TABLE IF NOT EXISTS $MEMBERS (
	ns         text        NOT NULL,
	grp        text        NOT NULL,
	member     text        NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (ns, grp, member)
);
