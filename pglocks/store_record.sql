-- $1 namespace, $2 task, $3 the run (JSON), $4 how many runs to keep.
-- Inserts the run and deletes the task's runs older than the $4 - 1 newest
-- that the statement's snapshot sees (the new one is not among them), in one
-- round trip. Writers racing each keep $4 - 1 of what they saw, so a task
-- holds at most $4 plus one run per concurrent writer, until the next record.
WITH added AS (
	INSERT INTO $RUNS (ns, task, run) VALUES ($1::text, $2::text, $3::text)
)
DELETE FROM $RUNS
WHERE ns = $1::text AND task = $2::text AND id <= (
	SELECT id FROM $RUNS WHERE ns = $1::text AND task = $2::text
	ORDER BY id DESC OFFSET $4::bigint - 1 LIMIT 1
)
