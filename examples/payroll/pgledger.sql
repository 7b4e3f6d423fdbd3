-- The payroll ledger on PostgreSQL: one row per closed payroll, in the
-- order written (id). Each write runs in a transaction that calls
-- pglocks.Guard first, so the table needs no token check of its own: token
-- is kept to show which lease wrote each row. The advisory lock, held until
-- this transaction ends, serializes nodes that create the table at once,
-- where two CREATE TABLE IF NOT EXISTS could otherwise both try to insert
-- the table into the catalog.
SELECT pg_advisory_xact_lock(hashtext('ndigo payroll_ledger'));
CREATE TABLE IF NOT EXISTS payroll_ledger (
	id    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	ns    text        NOT NULL,
	fire  timestamptz NOT NULL,
	node  text        NOT NULL,
	token bigint      NOT NULL
);
