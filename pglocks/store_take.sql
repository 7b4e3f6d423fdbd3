-- $1 namespace, $2 task, $3 the taking node. Deletes the task's pending
-- request, adds the taker's placeholder run (fire_ns: the request's instant
-- in Unix nanoseconds, as the Redis store writes it) and returns the
-- instant, in one statement: of the sessions racing for one request, only
-- the one whose DELETE removed the row gets it and adds a placeholder. The
-- next record trims the runs to the history length.
WITH taken AS (
	DELETE FROM $REQUESTS WHERE ns = $1::text AND task = $2::text RETURNING at
), placeholder AS (
	INSERT INTO $RUNS (ns, task, run)
	SELECT $1::text, $2::text,
		json_build_object('fire_ns', at, 'manual', true, 'node', $3::text, 'outcome', 'taken')::text
	FROM taken
)
SELECT at FROM taken
