-- $1 namespace, $2 task, $3 the run (JSON), $4 how many runs to keep, $5 the
-- placeholder the run replaces, as a JSON object its row contains
-- (fire_ns, node, outcome), or NULL for none, $6 how the run's JSON ends
-- when it has an ID (',"id":"<ID>"}'), or NULL for none.
-- Unless a row of the task ends as $6 (the run is kept: a resend of its
-- record), deletes the task's newest placeholder row that contains $5
-- (placeholders are json_build_object's text, '{"fire_ns" : ...'), inserts
-- the run and deletes the task's runs older than the $4 - 1 newest that the
-- statement's snapshot sees besides the replaced one (the new one is not
-- among them), in one round trip. Writers racing each keep $4 - 1 of what
-- they saw, so a task holds at most $4 plus one run per concurrent writer
-- or take, until the next record.
WITH resent AS (
	SELECT EXISTS (
		SELECT 1 FROM $RUNS
		WHERE ns = $1::text AND task = $2::text AND $6::text IS NOT NULL AND right(run, length($6::text)) = $6::text
	) AS kept
), replaced AS (
	DELETE FROM $RUNS
	WHERE NOT (SELECT kept FROM resent) AND ns = $1::text AND task = $2::text AND id = (
		SELECT id FROM $RUNS
		WHERE ns = $1::text AND task = $2::text AND $5::jsonb IS NOT NULL
			-- Only a placeholder's text is read as JSON (CASE keeps the order):
			-- a run's row is never parsed, whatever it holds.
			AND CASE WHEN run LIKE '{"fire_ns"%' THEN run::jsonb @> $5::jsonb ELSE false END
		ORDER BY id DESC LIMIT 1
	)
	RETURNING id
), added AS (
	INSERT INTO $RUNS (ns, task, run) SELECT $1::text, $2::text, $3::text FROM resent WHERE NOT kept
)
DELETE FROM $RUNS
WHERE NOT (SELECT kept FROM resent) AND ns = $1::text AND task = $2::text AND id <= (
	SELECT id FROM $RUNS
	WHERE ns = $1::text AND task = $2::text AND id NOT IN (SELECT id FROM replaced)
	ORDER BY id DESC OFFSET $4::bigint - 1 LIMIT 1
)
